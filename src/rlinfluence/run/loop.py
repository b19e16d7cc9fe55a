"""The run loop: a process's runs (one, or engine=stacked's seeds of a set) round by round, each round's due runs
advanced together (round.py's round on their agent's `Seeds`: the control engine's stack, control/engine.py),
each run's round written as it ends (metrics.csv row, checkpoint, summary.json; all of a round's or none),
resumable from its last checkpoint, stopped cleanly by a signal."""

from __future__ import annotations

import json
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig
from tqdm import tqdm

from rlinfluence.kernels import unavailable_line
from rlinfluence.round import Agent, initial_rows, run_round
from rlinfluence.run.agents import make_agent, seeds_of
from rlinfluence.run.checkpoint import (
    DONE,
    METRICS,
    RESULTS,
    SNAPSHOTS,
    SUMMARY,
    load_checkpoint,
    save_checkpoint,
    save_snapshot,
    write_json,
)
from rlinfluence.run.identity import IDENTITY, config_hash
from rlinfluence.run.interrupts import Interrupted, RunInterrupted, StopSignals
from rlinfluence.run.logger import RunLogger, rows_to_resume
from rlinfluence.run.provenance import merged_provenance, provenance
from rlinfluence.run.rundir import env_folder, method_tag, protocol_tag, run_leaf
from rlinfluence.share import FilterShare


def _summary(
    cfg: DictConfig, rounds_completed: int, final_test_return: float | None, done: bool, processes: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "experiment": cfg.experiment_name,
        "env": env_folder(cfg),  # env=gym: the id, as the run dir names it, so that figures tell ids apart
        "method": cfg.method.name,
        "method_tag": method_tag(cfg.method),
        "p": None if cfg.method.p is None else FilterShare.parse(cfg.method.p, "method.p", auto=True).percent,
        "optimizer": cfg.optimizer.name,
        "protocol": protocol_tag(cfg),
        "config_hash": config_hash(cfg),
        "seed": cfg.seed,
        "rounds": cfg.env.rounds,
        "rounds_completed": rounds_completed,
        "final_test_return": final_test_return,
        "done": done,
        "provenance": processes,
    }


def run_processes(run_dir: Path, resume: Resume, device: str) -> list[dict[str, Any]]:
    """The provenance of the processes that trained the run so far, this one last (run/provenance.py); a
    summary.json lost with a kill loses only the earlier processes' entries."""
    path = run_dir / SUMMARY
    earlier = json.loads(path.read_text()).get("provenance", []) if resume.checkpoint and path.exists() else []
    return merged_provenance(earlier, provenance(device))


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

    @property
    def next_round(self) -> int:
        """The first round this process trains: the one after the checkpoint's, or round 0."""
        return int(self.checkpoint["round"]) + 1 if self.checkpoint else 0


def read_resume(run_dir: Path) -> Resume:
    """RunDirError (one line) when the checkpoint or the rows it needs cannot be read: never a restart
    that silently discards them."""
    checkpoint = load_checkpoint(run_dir)
    if checkpoint is None:
        return Resume()
    return Resume(checkpoint, rows_to_resume(run_dir / METRICS, int(checkpoint["round"])))


@dataclass
class SeedRun:
    """One run a process trains: its config, run dir and what it resumes from."""

    cfg: DictConfig
    run_dir: Path
    resume: Resume

    @property
    def start(self) -> int:
        """The first round this process trains of the run."""
        return self.resume.next_round


def train(cfg: DictConfig, run_dir: Path, resume: Resume, last_round: int | None = None) -> dict[str, Any]:
    """Run (or resume) one training run in the existing `run_dir` with the agent `env.agent` names
    (run/agents.py); returns its summary. `last_round` < env.rounds stops it there, unfinished
    (task=replay)."""
    [summary] = train_runs([SeedRun(cfg, run_dir, resume)], last_round)
    return summary


def train_runs(runs: list[SeedRun], last_round: int | None = None) -> list[dict[str, Any]]:
    """Run (or resume) the runs in their existing run dirs, round by round, each round's due runs advanced together
    (engine=stacked: every seed of a set; a seed that resumes ahead of the others waits until its round is due);
    their summaries. The runs share every setting but the seed."""
    first = runs[0].cfg
    torch.set_num_threads(first.torch_threads)
    if (unpinned := unavailable_line()) is not None:  # the kernels its summary.json records are this CPU's own
        print(f"rlinfluence: {unpinned}", file=sys.stderr)
    agents: list[Agent] = []
    with StopSignals().installed() as signals:
        try:
            try:
                agents.extend(make_agent(run.cfg) for run in runs)
            except Interrupted as stop:
                raise interrupted(stop, min(run.start for run in runs), first) from None
            last = first.env.rounds if last_round is None else last_round
            return _train_rounds(runs, agents, signals, last)
        finally:
            for agent in agents:
                agent.close()


def _rounds_done(k: int) -> str:
    """What a run stopped in (or resumed at) round k keeps: rounds 0..k-1, each with its row and checkpoint."""
    return "no round is done" if k == 0 else "round 0 is done" if k == 1 else f"rounds 0-{k - 1} are done"


def interrupted(stop: Interrupted, k: int, cfg: DictConfig) -> RunInterrupted:
    return RunInterrupted(
        f"interrupted in round {k} of {cfg.env.rounds} ({_rounds_done(k)}); rerun the same command to resume at "
        f"round {k}",
        stop.exit_code,
    )


def resuming(run_dir: Path, k: int, cfg: DictConfig) -> str:
    if k > cfg.env.rounds:  # stopped after its last round's writes, before it was marked finished
        return f"resuming {run_dir}: {_rounds_done(k)}, none is left to train"
    return f"resuming {run_dir} at round {k} of {cfg.env.rounds} ({_rounds_done(k)})"


def run_name(cfg: DictConfig) -> str:
    """The run's name on its progress bar and in W&B."""
    return f"{env_folder(cfg)}-{run_leaf(cfg)}-{cfg.optimizer.name}-seed{cfg.seed}"


def write_round(
    cfg: DictConfig, run_dir: Path, logger: RunLogger, trainer: Agent, k: int, row: dict[str, Any], processes: list
) -> None:
    """Round k's row, checkpoint and summary; the caller defers signals around them (all of them or none)."""
    logger.log(row)
    state = trainer.state_dict(k)
    if cfg.checkpoint.snapshots:
        save_snapshot(run_dir, state)
    save_checkpoint(run_dir, state)
    write_json(run_dir / SUMMARY, _summary(cfg, k, logger.last_test_return, False, processes))


def write_end(cfg: DictConfig, run_dir: Path, logger: RunLogger, last_round: int, processes: list) -> dict[str, Any]:
    """The summary of a run stopped after `last_round`, and DONE when that is its last round; the summary."""
    done = last_round == cfg.env.rounds
    summary = _summary(cfg, last_round, logger.last_test_return, done, processes)
    write_json(run_dir / SUMMARY, summary)
    if done:
        (run_dir / DONE).touch()
    return summary


def _train_rounds(
    runs: list[SeedRun], agents: list[Agent], signals: StopSignals, last_round: int
) -> list[dict[str, Any]]:
    first = runs[0].cfg
    loggers: list[RunLogger] = []
    processes = [run_processes(run.run_dir, run.resume, run.cfg.device) for run in runs]
    in_round = start = min(run.start for run in runs)  # in_round: the round an interrupt stops
    summaries: list[dict[str, Any]] = []
    exit_code = 1
    try:
        for run, agent in zip(runs, agents):
            if run.resume.checkpoint:
                agent.load_state_dict(run.resume.checkpoint)
                print(f"rlinfluence: {resuming(run.run_dir, run.start, run.cfg)}", file=sys.stderr)
        with signals.deferred():  # each rewrites its metrics.csv with the rows it keeps
            loggers.extend(
                RunLogger(run.cfg, run.run_dir, run_name(run.cfg), run.resume.rows, agent.columns, len(runs) > 1)
                for run, agent in zip(runs, agents)
            )
        # The bar starts after W&B has started: its first line would otherwise follow the bar's, on the bar's line.
        desc = run_name(first) if len(runs) == 1 else f"{len(runs)} seeds stacked"
        with tqdm(
            range(start, last_round + 1),
            desc=desc,
            initial=start,
            total=first.env.rounds + 1,
            disable=not first.progress,
            unit="round",
        ) as progress:
            for k in progress:
                due = [i for i, run in enumerate(runs) if run.start <= k]
                seeds = seeds_of([agents[i] for i in due])
                rows = initial_rows(seeds) if k == 0 else run_round(seeds, k)
                with signals.deferred():  # each run's row, checkpoint and summary: all of them or none
                    for i, row in zip(due, rows):
                        write_round(runs[i].cfg, runs[i].run_dir, loggers[i], agents[i], k, row, processes[i])
                    in_round = k + 1  # a signal held back during these writes stops the next round
                progress.set_postfix(
                    test_return=f"{np.mean([row['test_return'] for row in rows]):.3g}",
                    kept=f"{np.mean([row['kept_fraction'] for row in rows]):.2f}",
                )
        with signals.deferred():
            summaries = [
                write_end(run.cfg, run.run_dir, logger, last_round, run_processes_)
                for run, logger, run_processes_ in zip(runs, loggers, processes)
            ]
        exit_code = 0
        return summaries
    except Interrupted as stop:
        if len(summaries) == len(runs):
            exit_code = 0  # the signal came during the last writes: the runs have finished
            return summaries
        raise interrupted(stop, in_round, first) from None
    finally:
        for i, logger in enumerate(loggers):
            logger.finish(summaries[i] if i < len(summaries) else None, exit_code)
