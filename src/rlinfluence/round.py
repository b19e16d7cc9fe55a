"""The round loop every environment and every method shares.

    for k in 1..K:
        buffer = collect(policy, envs, n_steps)          # records with ids, GAE advantages
        scores = attribute(policy, buffer, target)       # one float per record (if the method needs them)
        keep   = select(method, buffer, scores, rng)     # keep-mask or sampling weights
        stats  = update(policy, optimizer, buffer, keep) # PPO epochs over the kept records
        row    = evaluate(policy, eval_envs)             # test return
        log(row); checkpoint(k)                          # metrics.csv first, W&B mirror; resumable

Round 0 is the evaluation of the initial policy. What differs between envs and methods lives in
config and in the strategy objects (selection, target, action head), never in this loop. `train` drives
an agent (agents.Agent): `Trainer` below for the control envs, lm/trainer.py's for language models. The
loop owns what every agent shares: the order of the stages, their timing, the selection, the row's
common fields and the NaN of what a round did not measure (a round eval.every skips).
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

from rlinfluence.agents import Agent, make_agent
from rlinfluence.checkpoint import (METRICS, SNAPSHOTS, SUMMARY, load_checkpoint, save_checkpoint, save_snapshot,
                                    write_json)
from rlinfluence.collect import TrainEnvs, collect_rollout
from rlinfluence.config import ConfigError
from rlinfluence.evaluation import Evaluator, is_eval_round
from rlinfluence.influence import StepInfluence, rank_agreement, round_attribution
from rlinfluence.interrupts import Interrupted, RunInterrupted, StopSignals
from rlinfluence.networks import ActorCritic
from rlinfluence.provenance import merged_provenance, provenance
from rlinfluence.records import RolloutBuffer
from rlinfluence.rundir import DONE, IDENTITY, RESULTS, config_hash, method_tag, protocol_tag, run_leaf
from rlinfluence.run_logger import COLUMNS, RunLogger, rows_to_resume
from rlinfluence.seeding import numpy_generator, spawn_streams, torch_generator
from rlinfluence.selection import Attribute, Influence, Selection, make_selection, numeric_p
from rlinfluence.targets import TARGETS as CONTROL_TARGETS, make_target
from rlinfluence.update import make_optimizer, ppo_update, scheduled
from rlinfluence.validation import check_action_target, check_env, require_one_of

NAN = float("nan")


@dataclass
class ControlInfluence(Influence):
    steps: StepInfluence | None = None  # influence.checkpoints=every_step: summed during the update


class Trainer:
    """The control agent (env.agent=control, agents.py): everything a run owns (envs, policy, optimizer,
    every RNG) and their checkpointable state."""

    columns = COLUMNS
    TARGETS = tuple(CONTROL_TARGETS)

    @classmethod
    def check_config(cls, cfg: DictConfig) -> None:
        require_one_of("target.name", cfg.target.name, cls.TARGETS)
        check_env(cfg)
        given = [key for key in ("state", "action") if cfg.target[key] is not None]
        if given and cfg.target.name != "action":
            raise ConfigError(f"{', '.join(f'target.{key}' for key in given)} set the s* and a* of f_action, which "
                              f"target={cfg.target.name} does not use: add target=action, or drop them")
        if cfg.target.name == "action":
            if cfg.target.state is None or cfg.target.action is None:
                raise ConfigError("target=action needs target.state and target.action (the s* and a* of f_action)")
            check_action_target(cfg.env, list(cfg.target.state), list(cfg.target.action), "target")

    def __init__(self, cfg: DictConfig):
        self.cfg = cfg
        streams = spawn_streams(cfg.seed)
        self.envs = TrainEnvs(cfg.env, streams["train_envs"], cfg.collection)
        self.model = ActorCritic(self.envs.observation_space, self.envs.action_space, cfg.env.network,
                                 torch_generator(streams["network"])).to(cfg.device)
        self.optimizer = make_optimizer(cfg.optimizer, self.model.parameters())
        self.action_generator = torch_generator(streams["actions"])
        self.first_action_state = self.action_generator.get_state()  # collection.repeat_action_noise rewinds to it
        self.selection_rng = numpy_generator(streams["selection"])
        self.shuffle_rng = numpy_generator(streams["shuffle"])
        self.partition_rng = numpy_generator(streams["influence_partition"])  # influence.normalization=chunk
        self.evaluator = Evaluator(cfg.env, cfg.eval, streams["eval"])
        self.target = make_target(cfg.target, self.envs.observation_space.shape)
        self.method = make_selection(cfg)

    # The stages of a round (agents.Agent), each on its own so the analyses (analyses/) can rerun a
    # round's update from the same state with another selection.

    def state_fields(self) -> dict[str, float]:
        return {}

    def collect(self, k: int) -> RolloutBuffer:
        """Round k's rollout; the envs and RNGs carry on from the round before (k names the round only)."""
        if self.cfg.collection.repeat_action_noise:
            self.action_generator.set_state(self.first_action_state)
        self.envs.finished_returns.clear()
        self.envs.start_round()
        return collect_rollout(self.model, self.envs, self.cfg.env.n_steps, self.cfg.ppo.gamma,
                               self.cfg.ppo.gae_lambda, self.action_generator)

    def forward(self, k: int, buffer: RolloutBuffer) -> dict[str, float]:
        """Nothing: collect_rollout computes the log-probs, values and advantages at θ_k."""
        return {}

    def train_return(self, buffer: RolloutBuffer) -> float:
        """The mean return of the episodes that finished during the round's collection."""
        finished = self.envs.finished_returns
        return float(np.mean(finished)) if finished else NAN

    def attribution(self, buffer: RolloutBuffer) -> Attribute:
        """The round's influence scores on any target at θ_k (IIF's target is `self.target`)."""
        attribute = round_attribution(self.model, buffer, self.cfg.ppo, self.cfg.influence, self.partition_rng,
                                      self.optimizer)
        return lambda target: attribute(target).cpu().numpy()

    def influence(self, buffer: RolloutBuffer) -> np.ndarray:
        return self.attribution(buffer)(self.target)

    # Round k's update settings under ppo.lr_schedule and ppo.clip_range_schedule. The round-start
    # influence needs neither: at θ_k every ratio is 1, where no clip range clips, and it has no η.

    def learning_rate(self, k: int) -> float:
        return scheduled(self.cfg.optimizer.lr, self.cfg.ppo.lr_schedule, k, self.cfg.env.rounds)

    def ppo_settings(self, k: int) -> DictConfig:
        clip_range = scheduled(self.cfg.ppo.clip_range, self.cfg.ppo.clip_range_schedule, k, self.cfg.env.rounds)
        return OmegaConf.merge(self.cfg.ppo, {"clip_range": clip_range})

    def attribute(self, k: int, buffer: RolloutBuffer) -> ControlInfluence:
        """IIF's scores when the method needs them; with influence.checkpoints=every_step, the paper's
        multi-checkpoint influence too, summed during round k's update, and the round-start scores it is
        compared with."""
        steps = None
        if self.cfg.influence.checkpoints == "every_step":
            steps = StepInfluence(self.model, buffer, self.target, self.ppo_settings(k), self.learning_rate(k))
        if not (self.method.needs_scores or steps):
            return ControlInfluence()
        attribute = self.attribution(buffer)
        return ControlInfluence(attribute(self.target), attribute, steps)

    def update(self, k: int, buffer: RolloutBuffer, selection: Selection,
               influence: ControlInfluence | None = None) -> dict[str, float]:
        """Round k's PPO update (k sets the scheduled lr and clip range); with every-step influence, how
        well the round-start scores rank it."""
        steps = influence.steps if influence else None
        for group in self.optimizer.param_groups:
            group["lr"] = self.learning_rate(k)
        stats = ppo_update(self.model, self.optimizer, buffer, selection, self.ppo_settings(k), self.shuffle_rng,
                           on_step=None if steps is None else steps.add_step)
        if steps is None:
            return stats
        return stats | {"influence_step_spearman": rank_agreement(influence.scores, steps.scores.cpu().numpy(),
                                                                  selection.keep)}

    def evaluate(self, k: int) -> dict[str, float]:
        return self.evaluator.evaluate(self.model, k)

    def state_dict(self, k: int) -> dict[str, Any]:
        return {
            "round": k,
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "action_generator": self.action_generator.get_state(),
            "selection_rng": self.selection_rng.bit_generator.state,
            "shuffle_rng": self.shuffle_rng.bit_generator.state,
            "partition_rng": self.partition_rng.bit_generator.state,
            "envs": self.envs.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> int:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.action_generator.set_state(state["action_generator"])
        self.selection_rng.bit_generator.state = state["selection_rng"]
        self.shuffle_rng.bit_generator.state = state["shuffle_rng"]
        self.partition_rng.bit_generator.state = state["partition_rng"]
        self.envs.load_state_dict(state["envs"])
        return int(state["round"])

    def close(self) -> None:
        self.envs.close()
        self.evaluator.close()


# ----------------------------------------------------------------------------- one round, any agent

STAGE_TIMES = ("time_collect", "time_forward", "time_influence", "time_select", "time_update", "time_eval")


class Stopwatch:
    """Each stage's seconds, counted from the end of the stage before (a metrics.csv column each)."""

    def __init__(self) -> None:
        self.times: dict[str, float] = {}
        self.last = time.perf_counter()

    def lap(self, column: str) -> None:
        now = time.perf_counter()
        self.times[column] = now - self.last
        self.last = now


def metrics_row(agent: Agent, fields: dict[str, Any]) -> dict[str, Any]:
    """The agent's columns, NaN where the round did not measure them."""
    return {column: fields.get(column, NAN) for column in agent.columns}


def initial_row(agent: Agent) -> dict[str, Any]:
    """Round 0: the initial policy's evaluation; no other stage has run."""
    watch = Stopwatch()
    evaluation = agent.evaluate(0)
    watch.lap("time_eval")
    nothing_yet = {"round": 0, "env_steps": 0, "n_records": 0, "n_kept": 0, "gradient_steps": 0}
    return metrics_row(agent, nothing_yet | dict.fromkeys(STAGE_TIMES, 0.0) | watch.times | agent.state_fields()
                       | evaluation)


def evaluation(agent: Agent, k: int) -> dict[str, Any]:
    """Round k's evaluation; none in the rounds eval.every skips (the row's test return stays NaN)."""
    if not is_eval_round(k, agent.cfg.eval.every, agent.cfg.env.rounds):
        return {"eval_episodes": 0}
    return agent.evaluate(k)


def run_round(agent: Agent, k: int) -> dict[str, Any]:
    """Round k's stages in order, each timed; its metrics row."""
    watch = Stopwatch()
    fields = agent.state_fields()
    records = agent.collect(k)
    watch.lap("time_collect")
    fields |= agent.forward(k, records)
    watch.lap("time_forward")
    influence = agent.attribute(k, records)
    watch.lap("time_influence")
    selection = agent.method.select(records, influence.scores, agent.selection_rng, influence.attribute)
    watch.lap("time_select")
    fields |= agent.update(k, records, selection, influence)  # its time includes every-step influence
    watch.lap("time_update")
    fields |= evaluation(agent, k)
    watch.lap("time_eval")
    scores, n = influence.scores, len(records)
    return metrics_row(agent, fields | watch.times | {
        "round": k, "env_steps": k * n, "train_return": agent.train_return(records), "n_records": n,
        "n_kept": selection.n_kept, "kept_fraction": selection.n_kept / n,
        "n_negative": int((scores < 0).sum()) if scores is not None else NAN})


# ----------------------------------------------------------------------------- the run


def _summary(cfg: DictConfig, rounds_completed: int, final_test_return: float | None, done: bool,
             processes: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "experiment": cfg.experiment_name, "env": cfg.env.name, "method": cfg.method.name,
        "method_tag": method_tag(cfg.method), "p": numeric_p(cfg.method.p), "optimizer": cfg.optimizer.name,
        "protocol": protocol_tag(cfg), "config_hash": config_hash(cfg), "seed": cfg.seed, "rounds": cfg.env.rounds,
        "rounds_completed": rounds_completed, "final_test_return": final_test_return, "done": done,
        "provenance": processes,
    }


def _processes(run_dir: Path, resume: Resume) -> list[dict[str, Any]]:
    """The provenance of the processes that trained the run so far, this one last (provenance.py); a
    summary.json lost with a kill loses only the earlier processes' entries."""
    path = run_dir / SUMMARY
    earlier = json.loads(path.read_text()).get("provenance", []) if resume.checkpoint and path.exists() else []
    return merged_provenance(earlier, provenance())


def reset_run(run_dir: Path) -> None:
    """force=true: forget a previous attempt in this run dir (and nowhere else)."""
    for name in (*RESULTS, IDENTITY):
        (run_dir / name).unlink(missing_ok=True)
    shutil.rmtree(run_dir / "wandb", ignore_errors=True)
    shutil.rmtree(run_dir / SNAPSHOTS, ignore_errors=True)


@dataclass
class Resume:
    """What a run continues from: its last checkpoint and the metrics rows up to it (none for a new run)."""

    checkpoint: dict[str, Any] | None = None
    rows: list[dict[str, str]] = field(default_factory=list)


def read_resume(run_dir: Path) -> Resume:
    """RunDirError (one line) when the checkpoint or the rows it needs cannot be read: never a restart
    that silently discards them."""
    checkpoint = load_checkpoint(run_dir)
    if checkpoint is None:
        return Resume()
    return Resume(checkpoint, rows_to_resume(run_dir / METRICS, int(checkpoint["round"])))


def train(cfg: DictConfig, run_dir: Path, resume: Resume, last_round: int | None = None) -> dict[str, Any]:
    """Run (or resume) one training run in the existing `run_dir` with the agent `env.agent` names
    (agents.py); returns its summary. `last_round` < env.rounds stops it there, unfinished (task=replay)."""
    torch.set_num_threads(cfg.torch_threads)
    start = int(resume.checkpoint["round"]) + 1 if resume.checkpoint else 0
    with StopSignals().installed() as signals:
        try:
            trainer = make_agent(cfg)
        except Interrupted as stop:
            raise _interrupted(stop, start, cfg) from None
        try:
            return _train_rounds(cfg, run_dir, resume, trainer, start, signals,
                                 cfg.env.rounds if last_round is None else last_round)
        finally:
            trainer.close()


def _interrupted(stop: Interrupted, k: int, cfg: DictConfig) -> RunInterrupted:
    return RunInterrupted(f"interrupted in round {k} of {cfg.env.rounds}; rerun the same command to resume",
                          stop.exit_code)


def _train_rounds(cfg: DictConfig, run_dir: Path, resume: Resume, trainer: Agent, start: int,
                  signals: StopSignals, last_round: int) -> dict[str, Any]:
    name = f"{cfg.env.name}-{run_leaf(cfg)}-{cfg.optimizer.name}-seed{cfg.seed}"
    in_round, logger, exit_code, summary = start, None, 1, None  # in_round: the round an interrupt stops
    processes = _processes(run_dir, resume)
    progress = tqdm(range(start, last_round + 1), desc=name, initial=start, total=cfg.env.rounds + 1,
                    disable=not cfg.progress, unit="round")
    try:
        if resume.checkpoint:
            trainer.load_state_dict(resume.checkpoint)
            tqdm.write(f"rlinfluence: resuming {run_dir} from round {start - 1} of {cfg.env.rounds}", file=sys.stderr)
        with signals.deferred():  # it rewrites metrics.csv with the rows it keeps
            logger = RunLogger(cfg, run_dir, name, resume.rows, trainer.columns)
        for k in progress:
            row = initial_row(trainer) if k == 0 else run_round(trainer, k)
            with signals.deferred():  # a round's row, checkpoint and summary: all of them or none
                logger.log(row)
                state = trainer.state_dict(k)
                if cfg.checkpoint.snapshots:
                    save_snapshot(run_dir, state)
                save_checkpoint(run_dir, state)
                write_json(run_dir / SUMMARY, _summary(cfg, k, logger.last_test_return, False, processes))
                in_round = k + 1  # a signal held back during these writes stops the next round
            progress.set_postfix(test_return=f"{row['test_return']:.3g}", kept=f"{row['kept_fraction']:.2f}")
        done = last_round == cfg.env.rounds
        with signals.deferred():
            summary = _summary(cfg, last_round, logger.last_test_return, done, processes)
            write_json(run_dir / SUMMARY, summary)
            if done:
                (run_dir / DONE).touch()
        exit_code = 0
        return summary
    except Interrupted as stop:
        if summary is None:
            raise _interrupted(stop, in_round, cfg) from None
        exit_code = 0  # the signal came during the last writes: the run has finished
        return summary
    finally:
        progress.close()
        if logger is not None:
            logger.finish(summary, exit_code)
