"""`task=<name>`: what a command does besides training. A task is a function of the config that its module
registers here (`@register("name", check=...)`); `TASK_MODULES` names each task's module, so `validate` and
the CLI know every name without importing any of them (a training command loads no figure or analysis
code), and a task's module is imported only when that task runs or is checked. A task's `check` raises
ConfigError on settings it cannot run with; `validate` calls it before anything is trained or written."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from omegaconf import DictConfig

TRAIN = "train"  # the default task: lifecycle.start_training, which also takes a run dir from tests
TASK_MODULES = {
    "figures": "rlinfluence.figures",
    "diagnose": "rlinfluence.analyses.diagnose",
    "intervene": "rlinfluence.analyses.intervene",
    "timeline": "rlinfluence.analyses.timeline",
    "counterfactual": "rlinfluence.analyses.counterfactual",
    "bottom_frames": "rlinfluence.analyses.bottom_frames",
    "replay": "rlinfluence.replay",
}
TASKS: dict[str, Callable[[DictConfig], Any]] = {}
TASK_CHECKS: dict[str, Callable[[DictConfig], None]] = {}


def register(
    name: str, check: Callable[[DictConfig], None] | None = None
) -> Callable[[Callable[[DictConfig], Any]], Callable[[DictConfig], Any]]:
    def add(task: Callable[[DictConfig], Any]) -> Callable[[DictConfig], Any]:
        TASKS[name] = task
        if check is not None:
            TASK_CHECKS[name] = check
        return task

    return add


def load_task(name: str) -> Callable[[DictConfig], Any]:
    importlib.import_module(TASK_MODULES[name])
    return TASKS[name]


def task_names() -> tuple[str, ...]:
    return (TRAIN, *sorted(TASK_MODULES))


def check_task(cfg: DictConfig) -> None:
    """The chosen task's own checks (its analysis.* or figures.* settings), before the task runs."""
    if cfg.task != TRAIN:
        load_task(cfg.task)
    if cfg.task in TASK_CHECKS:
        TASK_CHECKS[cfg.task](cfg)
