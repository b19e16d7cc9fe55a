"""Deterministic run directories: the same overrides always map to the same folder.

runs/<experiment_name>/<env>/<optimizer>/<method_tag>/seed<seed>/ — so a rerun resumes or skips, and
figure scripts find runs without a database. Hydra's run and sweep dirs use the `method_tag`
resolver registered here.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf

DONE = "DONE"


def method_tag(method: DictConfig) -> str:
    from rlinfluence.selection import SELECTION_METHODS

    method_class = SELECTION_METHODS.get(method.name)
    return method_class.tag(method) if method_class else str(method.name)


def relative_run_dir(cfg: DictConfig) -> Path:
    return Path(cfg.env.name) / cfg.optimizer.name / method_tag(cfg.method) / f"seed{cfg.seed}"


def run_dir(cfg: DictConfig) -> Path:
    return Path(cfg.runs_root) / cfg.experiment_name / relative_run_dir(cfg)


def is_done(path: Path) -> bool:
    return (path / DONE).exists()


def register_resolvers() -> None:
    if not OmegaConf.has_resolver("method_tag"):
        OmegaConf.register_new_resolver("method_tag", method_tag)
