"""The standard-PPO run an analysis looks into, trained first when it is missing, and its rounds
replayed from the snapshots it kept.

A snapshot is the run's whole checkpoint after a round (weights, optimizer, every RNG, env states), so
a Seed loaded with snapshot k−1 runs round k exactly as the run did: the same buffer, and on the
same selection the same minibatch order and θ_k+1, bit for bit.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

from rlinfluence.choices import ConfigError
from rlinfluence.config.compose import default_config
from rlinfluence.config.paths import check_writable
from rlinfluence.control.engine import Seed
from rlinfluence.records import RolloutBuffer
from rlinfluence.run import rundir
from rlinfluence.run.checkpoint import load_snapshot, write_bytes, write_json
from rlinfluence.run.identity import UNSET, digest, flatten, non_default_settings
from rlinfluence.run.lifecycle import start_training
from rlinfluence.selection import Selection


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
    """The run's dir, after training (or resuming) it, as the CLI would, when it has not finished."""
    run_dir = rundir.run_dir(run_cfg)
    if not rundir.is_done(run_dir):
        start_training(run_cfg, run_dir)
    return run_dir


def before_round(trainer: Seed, run_dir: Path, k: int) -> dict:
    """Put the trainer where the run stood when round k began; returns that snapshot."""
    state = load_snapshot(run_dir, k - 1)
    trainer.load_state_dict(state)
    return state


def rerun_update(trainer: Seed, start: dict, buffer: RolloutBuffer, selection: Selection) -> None:
    """Round k's update again on `selection`, from where the run stood when it began (θ_k, optimizer,
    minibatch shuffle RNG): on every record it gives the run's own θ_k+1. A copy of `start` is loaded:
    the optimizer adopts the state's tensors (Adam's moments), which its steps then change in place."""
    completed = trainer.load_state_dict(copy.deepcopy(start))
    trainer.update(completed + 1, buffer, selection)


def matches_run(trainer: Seed, run_dir: Path, k: int) -> bool:
    """Whether the trainer's weights equal, bit for bit, the run's after round k."""
    snapshot = load_snapshot(run_dir, k)["model"]
    return all(torch.equal(value, snapshot[name]) for name, value in trainer.model.state_dict().items())


ANALYSES = "analyses"  # the folder of a run dir that holds the analyses made of the run


def analysis_identity(cfg: DictConfig, analysis: str, variant: str = "") -> dict[str, Any]:
    """What an analysis output is: its standard run (dir, protocol, non-default settings) and its own
    `analysis.<name>.*` settings that differ from their defaults; `config_hash` is taken of both. The seed
    is the file's (and the run dir's), so one figure's seeds share a hash."""
    run_cfg = standard_run_config(cfg)
    own = flatten({f"analysis.{analysis}": OmegaConf.to_container(cfg.analysis[analysis], resolve=True)})
    defaults = flatten(
        {f"analysis.{analysis}": OmegaConf.to_container(default_config(run_cfg).analysis[analysis], resolve=True)}
    )
    settings = {
        "protocol": rundir.protocol_tag(run_cfg),
        **non_default_settings(run_cfg),
        **{key: value for key, value in own.items() if value != defaults.get(key, UNSET)},
    }
    return {
        "analysis": analysis,
        "variant": variant,
        "env": cfg.env.name,
        "optimizer": cfg.optimizer.name,
        "seed": cfg.seed,
        "run": str(rundir.relative_run_dir(run_cfg).parent),
        "config_hash": digest(settings),
        "non_default": settings,
    }


def csv_bytes(rows: pd.DataFrame) -> bytes:
    return rows.to_csv(index=False, float_format="%.8g").encode()


def write_rows(
    cfg: DictConfig,
    run_dir: Path,
    analysis: str,
    rows: pd.DataFrame,
    variant: str = "",
    encode: Callable[[pd.DataFrame], bytes] = csv_bytes,
    suffix: str = ".csv",
) -> Path:
    """The rows beside the run they analyse, `<run dir>/analyses/<analysis><variant>-<hash><suffix>` (a CSV
    unless the rows hold what a CSV cannot), with their identity in the .json of the same name (written
    last: a file without one is not a finished output). `task=figures figures.runs_root=...` gathers them
    into paper_figures/data/analyses/ (figures/gather.py)."""
    identity = analysis_identity(cfg, analysis, variant)
    stem = run_dir / ANALYSES / f"{analysis}{variant}-{identity['config_hash']}"
    stem.parent.mkdir(exist_ok=True)
    path = stem.parent / f"{stem.name}{suffix}"
    write_bytes(path, encode(rows))
    write_json(stem.parent / f"{stem.name}.json", identity)
    print(
        f"rlinfluence: wrote {path}; `rlinfluence task=figures figures.runs_root={cfg.runs_root}` gathers it "
        f"into paper_figures/data/analyses/{analysis}/"
    )
    return path


def analyse_rounds(
    cfg: DictConfig,
    analysis: str,
    rounds: list[int],
    analyse_round: Callable[[Seed, Path, int], pd.DataFrame],
    variant: str = "",
    encode: Callable[[pd.DataFrame], bytes] = csv_bytes,
    suffix: str = ".csv",
    report: Callable[[pd.DataFrame], list[str]] = lambda rows: [],
) -> pd.DataFrame:
    """Train the standard run if needed, then `analyse_round` each round from its snapshots; prints the
    analysis' wall time (the standard run's training not counted) and the lines `report` makes of the rows,
    then writes the rows (write_rows: `encode`d to `suffix`, a CSV unless they hold what a CSV cannot) and
    says where, last."""
    run_cfg = standard_run_config(cfg)
    run_dir = ensure_standard_run(run_cfg)
    started = time.perf_counter()
    torch.set_num_threads(run_cfg.torch_threads)
    trainer = Seed(run_cfg)  # its rounds replayed through a stack of one, as its run trained them
    try:
        parts = [
            analyse_round(trainer, run_dir, k)
            for k in tqdm(
                rounds, desc=f"{analysis} {cfg.env.name} seed{cfg.seed}", unit="round", disable=not cfg.progress
            )
        ]
    finally:
        trainer.close()
    table = pd.concat(parts, ignore_index=True)
    print(
        f"rlinfluence: {analysis} {cfg.env.name} seed {cfg.seed}: {time.perf_counter() - started:.0f} s for "
        f"{len(rounds)} round(s)"
    )
    for line in report(table):
        print(f"rlinfluence: {line}")
    write_rows(cfg, run_dir, analysis, table, variant, encode, suffix)
    return table
