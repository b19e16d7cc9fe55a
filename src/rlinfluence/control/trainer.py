"""The control agent: the envs, actor-critic, optimizer and RNGs of one run, and what each stage of a round asks of
one seed (its rollout's start and records, its attribution at θ_k, its schedules, its evaluation on library envs).
The stages themselves run on the control engine (control/engine.py), once for all the seeds a process trains."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, cast

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from rlinfluence.choices import ConfigError, require, require_one_of
from rlinfluence.config.schema import PPOConfig
from rlinfluence.control.collect import Critic, Rollout, Scored, TrainEnvs
from rlinfluence.control.evaluation import Evaluator
from rlinfluence.control.fit import check_action_target, check_env
from rlinfluence.control.networks import ActorCritic
from rlinfluence.corruption import ADVANTAGE_SIGN, REWARD, negate_planted_advantages, planted_records
from rlinfluence.envs.make import space_shape
from rlinfluence.influence import EVERY_STEP, StepInfluence, rank_agreement, round_attribution
from rlinfluence.records import RolloutBuffer
from rlinfluence.round import COLUMNS
from rlinfluence.seeding import numpy_generator, spawn_streams, torch_generator
from rlinfluence.selection import Attribute, Influence, Selection, make_selection
from rlinfluence.targets import TARGETS as CONTROL_TARGETS, make_target
from rlinfluence.update import make_optimizer, scheduled

NAN = float("nan")


@dataclass
class ControlInfluence(Influence):
    steps: StepInfluence | None = None  # influence.checkpoints=every_step: summed during the update


def step_agreement(influence: ControlInfluence | None, selection: Selection) -> dict[str, float]:
    """With every-step influence, how well the round-start scores rank it (the row's influence_step_spearman)."""
    if influence is None or influence.steps is None:
        return {}
    assert influence.scores is not None  # the round-start scores are computed beside the steps
    return {
        "influence_step_spearman": rank_agreement(
            influence.scores, influence.steps.scores.cpu().numpy(), selection.keep
        )
    }


class Trainer:
    """The control agent (env.agent=control, run/agents.py): everything a run owns (envs, policy, optimizer,
    every RNG) and their checkpointable state."""

    columns: ClassVar[list[str]] = COLUMNS  # round.Agent's: a class's, not an instance's
    TARGETS = tuple(CONTROL_TARGETS)

    @classmethod
    def check_config(cls, cfg: DictConfig) -> None:
        require_one_of("target.name", cfg.target.name, cls.TARGETS)
        records = cfg.env.n_envs * cfg.env.n_steps
        require(
            cfg.ppo.batch_size <= records,
            f"ppo.batch_size={cfg.ppo.batch_size} must be <= the records of a round, env.n_envs x env.n_steps = "
            f"{cfg.env.n_envs} x {cfg.env.n_steps} = {records}",
        )
        check_env(cfg)
        given = [key for key in ("state", "action") if cfg.target[key] is not None]
        if given and cfg.target.name != "action":
            raise ConfigError(
                f"{', '.join(f'target.{key}' for key in given)} set the s* and a* of f_action, which "
                f"target={cfg.target.name} does not use: add target=action, or drop them"
            )
        if cfg.target.name == "action":
            if cfg.target.state is None or cfg.target.action is None:
                raise ConfigError("target=action needs target.state and target.action (the s* and a* of f_action)")
            check_action_target(cfg.env, list(cfg.target.state), list(cfg.target.action), "target")

    def __init__(self, cfg: DictConfig):
        self.cfg = cfg
        streams = spawn_streams(cfg.seed)
        self.envs = TrainEnvs(cfg.env, streams["train_envs"], cfg.collection)
        self.model = ActorCritic(
            self.envs.observation_space, self.envs.action_space, cfg.env.network, torch_generator(streams["network"])
        ).to(cfg.device)
        self.optimizer = make_optimizer(cfg.optimizer, self.model.parameters())
        self.action_generator = torch_generator(streams["actions"])
        self.first_action_state = self.action_generator.get_state()  # collection.repeat_action_noise rewinds to it
        self.selection_rng = numpy_generator(streams["selection"])
        self.shuffle_rng = numpy_generator(streams["shuffle"])
        self.partition_rng = numpy_generator(streams["influence_partition"])  # influence.normalization=chunk
        self.evaluator = Evaluator(cfg.env, cfg.eval, streams["eval"])
        self.target = make_target(cfg.target, space_shape(self.envs.observation_space))
        self.method = make_selection(cfg)

    # One seed's part in the stages of a round (control/engine.py runs them).

    def state_fields(self) -> dict[str, float]:
        return {}

    def start_rollout(self) -> torch.Tensor:
        """Ready the envs for the round's rollout (the collection protocol applied); its action noise,
        (n_steps, n_envs, ...)."""
        if self.cfg.collection.repeat_action_noise:
            self.action_generator.set_state(self.first_action_state)
        self.envs.finished_returns.clear()
        self.envs.start_round()
        return self.model.action_head.draw_noise((self.cfg.env.n_steps, self.cfg.env.n_envs), self.action_generator)

    def planted(self, k: int) -> torch.Tensor | None:
        """Round k's planted records (bool per record id; corruption.*), None in a clean run."""
        corruption = self.cfg.corruption
        return planted_records(self.cfg.seed, k, self.cfg.env.n_envs * self.cfg.env.n_steps, corruption.fraction)

    def scored(self, rollout: Rollout, i: int, critic: Critic, planted: torch.Tensor | None) -> Scored:
        """Its seed's grids of a finished rollout (seed i of it), computed with `critic`; its planted rewards negated
        (corruption.kind=reward)."""
        negated = planted if self.cfg.corruption.kind == REWARD else None
        return rollout.scored(i, critic, self.cfg.ppo.gamma, negated)

    def corrupted(self, buffer: RolloutBuffer, planted: torch.Tensor | None) -> RolloutBuffer:
        """The round's records marked with their planted ones, whose advantages are negated under
        corruption.kind=advantage_sign."""
        buffer.planted = planted
        if planted is not None and self.cfg.corruption.kind == ADVANTAGE_SIGN:
            negate_planted_advantages(buffer)
        return buffer

    def train_return(self, buffer: RolloutBuffer) -> float:
        """The mean return of the episodes that finished during the round's collection."""
        finished = self.envs.finished_returns
        return float(np.mean(finished)) if finished else NAN

    def attribution(self, buffer: RolloutBuffer) -> Attribute:
        """The round's influence scores on any target at θ_k (IIF's target is `self.target`)."""
        attribute = round_attribution(
            self.model, buffer, self.cfg.ppo, self.cfg.influence, self.partition_rng, self.optimizer
        )
        return lambda target: attribute(target).cpu().numpy()

    def influence(self, buffer: RolloutBuffer) -> np.ndarray:
        return self.attribution(buffer)(self.target)

    # Round k's update settings under ppo.lr_schedule and ppo.clip_range_schedule. The round-start
    # influence needs neither: at θ_k every ratio is 1, where no clip range clips, and it has no η.

    def learning_rate(self, k: int) -> float:
        return scheduled(self.cfg.optimizer.lr, self.cfg.ppo.lr_schedule, k, self.cfg.env.rounds)

    def ppo_settings(self, k: int) -> PPOConfig:
        clip_range = scheduled(self.cfg.ppo.clip_range, self.cfg.ppo.clip_range_schedule, k, self.cfg.env.rounds)
        return cast(PPOConfig, OmegaConf.merge(self.cfg.ppo, {"clip_range": clip_range}))

    def wants_scores(self, buffer: RolloutBuffer) -> bool:
        """Whether round-start scores are computed: the method ranks by them, a corrupted run ranks its planted
        records by them (every arm), or every-step influence is compared with them."""
        return self.method.needs_scores or buffer.planted is not None or self.cfg.influence.checkpoints == EVERY_STEP

    def steps(self, k: int, buffer: RolloutBuffer) -> StepInfluence | None:
        """influence.checkpoints=every_step: round k's multi-checkpoint influence, summed during its update."""
        if self.cfg.influence.checkpoints != EVERY_STEP:
            return None
        target = self.method.scored_target(self.target)  # method=consensus: the round's mean loss
        return StepInfluence(self.model, buffer, target, self.ppo_settings(k), self.learning_rate(k))

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
