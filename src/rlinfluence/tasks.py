"""`task=<name>`: what a command does besides training. A task is a module that registers a function of
the config here (`@register("name", check=...)`); `load_tasks` imports the modules that do, so `validate`
and the CLI know every name without a branch per task. A task's `check` raises ConfigError on settings it
cannot run with; `validate` calls it before anything is trained or written."""

from __future__ import annotations

import importlib
from typing import Any, Callable

from omegaconf import DictConfig

TRAIN = "train"  # the default task: cli.start_training, which also takes a run dir from tests
TASK_MODULES = ("rlinfluence.figures", "rlinfluence.analyses.diagnose", "rlinfluence.analyses.intervene",
                "rlinfluence.analyses.timeline", "rlinfluence.analyses.counterfactual",
                "rlinfluence.analyses.bottom_frames", "rlinfluence.replay")
TASKS: dict[str, Callable[[DictConfig], Any]] = {}
TASK_CHECKS: dict[str, Callable[[DictConfig], None]] = {}


def register(name: str, check: Callable[[DictConfig], None] | None = None
             ) -> Callable[[Callable[[DictConfig], Any]], Callable[[DictConfig], Any]]:
    def add(task: Callable[[DictConfig], Any]) -> Callable[[DictConfig], Any]:
        TASKS[name] = task
        if check is not None:
            TASK_CHECKS[name] = check
        return task

    return add


def load_tasks() -> dict[str, Callable[[DictConfig], Any]]:
    for module in TASK_MODULES:
        importlib.import_module(module)
    return TASKS


def task_names() -> tuple[str, ...]:
    return (TRAIN, *sorted(load_tasks()))


def check_task(cfg: DictConfig) -> None:
    """The chosen task's own checks (its analysis.* or figures.* settings), before the task runs."""
    load_tasks()
    if cfg.task in TASK_CHECKS:
        TASK_CHECKS[cfg.task](cfg)
