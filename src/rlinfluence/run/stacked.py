"""An engine=stacked command: the seeds of `seeds` trained together (control/engine.py), each into its own run
dir, laid out as a one-seed run's is (identity.json, metrics.csv, checkpoint.pt, summary.json, DONE),
each checked, resumed or skipped as that run alone would be. A seed resumes from its own last round: the
seeds behind run their rounds alone (in a smaller stack) until the others' rounds are due."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from rlinfluence.config.engines import STACKED, seed_list
from rlinfluence.run import rundir
from rlinfluence.run.checkpoint import RESTART, RunDirError
from rlinfluence.run.lifecycle import announce_finished, announce_trained, check_run, prepare_run, resume_point
from rlinfluence.run.loop import Resume, SeedRun, train_runs
from rlinfluence.run.writer import RunDirBusy, sole_writer


def seed_configs(cfg: DictConfig) -> list[DictConfig]:
    """Each run's config: engine=stacked's, the command's with `seed` set to each seed; else the command's."""
    if cfg.engine != STACKED:
        return [cfg]
    configs = []
    for seed in seed_list(cfg):
        seed_cfg = copy.deepcopy(cfg)
        seed_cfg.seed = seed
        configs.append(seed_cfg)
    return configs


def seed_runs(cfg: DictConfig) -> list[tuple[DictConfig, Path]]:
    return [(seed_cfg, rundir.run_dir(seed_cfg)) for seed_cfg in seed_configs(cfg)]


def start_stacked(cfg: DictConfig) -> list[dict[str, Any]]:
    """Every seed's run dir checked before the first write (one line, exit 2, nothing written), the finished
    ones said and skipped, the others locked (run/writer.py) and trained together; the trained seeds' summaries.

    A set trains all its unfinished seeds or none: when another process is training one of them, the command
    is refused whole (a set that trained the free seeds would leave the held ones to a rerun that looks done)."""
    checked = [(seed_cfg, run_dir, check_seed_run(seed_cfg, run_dir)) for seed_cfg, run_dir in seed_runs(cfg)]
    to_train = []
    for seed_cfg, run_dir, resume in checked:  # said once every seed has passed its checks: a refusal is one line
        if resume is None:
            announce_finished(run_dir)
        else:
            to_train.append((seed_cfg, run_dir))
    if not to_train:
        return []
    try:
        with sole_writer([run_dir for _, run_dir in to_train], cfg.runs_root):
            return _train_locked(to_train)
    except RunDirBusy as busy:
        raise RunDirBusy(f"{busy} (no seed of seeds={seed_list(cfg)} was trained: a set trains all or none)") from None


def check_seed_run(seed_cfg: DictConfig, run_dir: Path) -> Resume | None:
    """check_run for one seed of a set; a refusal's way out is that seed's own restart: force=true on the set
    would restart every seed of it from round 0."""
    try:
        return check_run(seed_cfg, run_dir)
    except RunDirError as error:
        seed = seed_cfg.seed
        way_out = (
            f"seeds=[{seed}] force=true (the same command otherwise) restarts seed {seed} alone from scratch, "
            f"deleting its results, and the same command then trains the set (force=true on the set would restart "
            f"every seed of it)"
        )
        raise RunDirError(str(error).replace(RESTART, way_out)) from None


def _train_locked(to_train: list[tuple[DictConfig, Path]]) -> list[dict[str, Any]]:
    runs = []
    for seed_cfg, run_dir in to_train:
        resume = resume_point(seed_cfg, run_dir)  # read again under the lock
        if resume is None:
            announce_finished(run_dir)
        else:
            runs.append(SeedRun(seed_cfg, run_dir, resume))
    if not runs:
        return []
    for run in runs:
        prepare_run(run.cfg, run.run_dir, run.resume)
    summaries = train_runs(runs)
    for run, summary in zip(runs, summaries):
        announce_trained(run.run_dir, summary)
    return summaries
