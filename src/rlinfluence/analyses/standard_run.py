"""The standard-PPO run an analysis looks into, trained first when it is missing, and its rounds
replayed from the snapshots it kept.

A snapshot is the run's whole checkpoint after a round (weights, optimizer, every RNG, env states), so
a Trainer loaded with snapshot k−1 runs round k exactly as the run did: the same buffer, and on the
same selection the same minibatch order and θ_k+1, bit for bit.
"""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Callable

import pandas as pd
import torch
from omegaconf import DictConfig
from tqdm import tqdm

from rlinfluence import rundir
from rlinfluence.checkpoint import load_snapshot
from rlinfluence.config import ConfigError
from rlinfluence.records import RolloutBuffer
from rlinfluence.round import Trainer
from rlinfluence.selection import Selection
from rlinfluence.validation import check_writable


def standard_run_config(cfg: DictConfig) -> DictConfig:
    """The command's env, seed and settings, with method=ppo and per-round snapshots."""
    run_cfg = copy.deepcopy(cfg)
    run_cfg.task = "train"
    run_cfg.method.name, run_cfg.method.p, run_cfg.method.variant = "ppo", None, None
    run_cfg.checkpoint.snapshots = True
    return run_cfg


def check_rounds(cfg: DictConfig, key: str, rounds: list[int]) -> None:
    if not rounds or not all(1 <= k <= cfg.env.rounds for k in rounds):
        raise ConfigError(f"{key}={list(rounds)} must be rounds in 1..{cfg.env.rounds} (env.rounds)")


def every_round_if_empty(cfg: DictConfig, rounds: list[int]) -> list[int]:
    return list(rounds) or list(range(1, cfg.env.rounds + 1))


def check_outputs(cfg: DictConfig) -> None:
    """Where an analysis writes: its standard run under runs_root, its rows under figures.data_dir."""
    check_writable("runs_root", cfg.runs_root)
    check_writable("figures.data_dir", cfg.figures.data_dir)


def check_at_least_one(settings: DictConfig, prefix: str, meanings: dict[str, str]) -> None:
    """Counts an analysis needs at least one of: {key: what it counts}."""
    for key, meaning in meanings.items():
        if settings[key] < 1:
            raise ConfigError(f"{prefix}.{key}={settings[key]} must be >= 1 ({meaning})")


def ensure_standard_run(run_cfg: DictConfig) -> Path:
    """The run's dir, after training (or resuming) it when it has not finished."""
    from rlinfluence.cli import start_training  # the CLI's own path: identity check, resume, refusals

    run_dir = rundir.run_dir(run_cfg)
    if not rundir.is_done(run_dir):
        start_training(run_cfg, run_dir)
    return run_dir


def before_round(trainer: Trainer, run_dir: Path, k: int) -> dict:
    """Put the trainer where the run stood when round k began; returns that snapshot."""
    state = load_snapshot(run_dir, k - 1)
    trainer.load_state_dict(state)
    return state


def rerun_update(trainer: Trainer, start: dict, buffer: RolloutBuffer, selection: Selection) -> None:
    """Round k's update again on `selection`, from where the run stood when it began (θ_k, optimizer,
    minibatch shuffle RNG): on every record it gives the run's own θ_k+1. A copy of `start` is loaded:
    the optimizer adopts the state's tensors (Adam's moments), which its steps then change in place."""
    completed = trainer.load_state_dict(copy.deepcopy(start))
    trainer.update(completed + 1, buffer, selection)


def matches_run(trainer: Trainer, run_dir: Path, k: int) -> bool:
    """Whether the trainer's weights equal, bit for bit, the run's after round k."""
    snapshot = load_snapshot(run_dir, k)["model"]
    return all(torch.equal(value, snapshot[name]) for name, value in trainer.model.state_dict().items())


def analysis_path(cfg: DictConfig, analysis: str, variant: str = "", suffix: str = ".csv") -> Path:
    """One file per (env, seed, variant): jobs of a sweep never write the same file, and a variant of an
    analysis (e.g. `-p12.5`) never replaces the default's rows."""
    path = Path(cfg.figures.data_dir) / "analyses" / analysis / f"{cfg.env.name}-seed{cfg.seed}{variant}{suffix}"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def write_rows(cfg: DictConfig, analysis: str, rows: pd.DataFrame, variant: str = "") -> Path:
    path = analysis_path(cfg, analysis, variant)
    rows.to_csv(path, index=False, float_format="%.8g")
    return path


def analyse_rounds(cfg: DictConfig, analysis: str, rounds: list[int],
                   analyse_round: Callable[[Trainer, Path, int], pd.DataFrame], variant: str = "",
                   write: Callable[[DictConfig, str, pd.DataFrame, str], Path] = write_rows) -> pd.DataFrame:
    """Train the standard run if needed, then `analyse_round` each round from its snapshots; writes the
    rows (`write`: a CSV unless the rows hold what a CSV cannot) and prints the analysis' wall time (the
    standard run's training not counted)."""
    run_cfg = standard_run_config(cfg)
    run_dir = ensure_standard_run(run_cfg)
    started = time.perf_counter()
    torch.set_num_threads(run_cfg.torch_threads)
    trainer = Trainer(run_cfg)
    try:
        parts = [analyse_round(trainer, run_dir, k) for k in tqdm(
            rounds, desc=f"{analysis} {cfg.env.name} seed{cfg.seed}", unit="round", disable=not cfg.progress)]
    finally:
        trainer.close()
    table = pd.concat(parts, ignore_index=True)
    path = write(cfg, analysis, table, variant)
    print(f"rlinfluence: wrote {path}; `rlinfluence task=figures` draws it")
    print(f"rlinfluence: {analysis} {cfg.env.name} seed {cfg.seed}: {time.perf_counter() - started:.0f} s for "
          f"{len(rounds)} round(s)")
    return table
