"""One logger per run: the local `metrics.csv` is the source of truth, W&B mirrors it.

Each round appends one flushed, fsynced CSV row. W&B (offline by default) gets the same numbers;
any W&B failure is reported once and the mirror switched off, so training never dies of logging.
"""

from __future__ import annotations

import csv
import hashlib
import math
import os
import sys
from pathlib import Path
from typing import Any, cast

from omegaconf import DictConfig, OmegaConf

from rlinfluence.run.checkpoint import METRICS, unreadable

COLUMNS = [
    "round",
    "env_steps",
    "test_return",
    "test_return_sem",
    "eval_episodes",
    "train_return",
    "n_records",
    "n_kept",
    "n_negative",
    "kept_fraction",
    "gradient_steps",
    "policy_loss",
    "value_loss",
    "entropy",
    "approx_kl",
    "clip_fraction",
    "time_collect",
    "time_influence",
    "time_select",
    "time_update",
    "time_eval",
    "influence_step_spearman",  # influence.checkpoints=every_step only
]
# The language-model agent's columns beyond those (lm/trainer.py): test toxicity, the KL controller, and
# the forward passes' time (Table 6 splits a round into generation & scoring, forward, influence, update).
LM_COLUMNS = ["test_toxicity", "test_toxicity_sem", "kl_coef", "mean_kl", "time_forward"]
# W&B panel sections, CleanRL style ("charts/...", "losses/...").
SECTIONS = {
    "charts": ("test_return", "test_return_sem", "train_return", "env_steps"),
    "selection": ("n_records", "n_kept", "n_negative", "kept_fraction", "gradient_steps", "influence_step_spearman"),
    "losses": ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction"),
    "time": ("time_collect", "time_influence", "time_select", "time_update", "time_eval", "time_forward"),
    "lm": ("test_toxicity", "test_toxicity_sem", "kl_coef", "mean_kl"),
}


def rows_to_resume(path: Path, last_round: int) -> list[dict[str, str]]:
    """The rows of rounds 0..`last_round` (the checkpoint's); RunDirError when the file cannot give
    them all, since resuming would then leave a hole in the run's record. Later rows are recomputed,
    and a row cut short by a kill (missing fields) can only be one of them."""
    try:
        with open(path, newline="") as handle:
            rows = [
                row for row in csv.DictReader(handle) if None not in row.values() and int(row["round"]) <= last_round
            ]
        rounds = [int(row["round"]) for row in rows]
    except (OSError, csv.Error, UnicodeDecodeError, ValueError, KeyError) as error:
        raise unreadable(path, error) from None
    if rounds != list(range(last_round + 1)):
        raise unreadable(path, ValueError(f"rounds 0-{last_round} of the checkpoint are not all in it"))
    return rows


DISABLED = "disabled"
LOGGER_MODES = ("offline", "online", DISABLED)  # logger.mode: wandb.init's modes, passed through to it


class WandbMirror:
    def __init__(self, cfg: DictConfig, run_dir: Path, run_name: str):
        self.run = None
        if cfg.logger.mode == DISABLED:
            return
        try:
            import wandb

            self.run = wandb.init(
                project=cfg.logger.project,
                entity=cfg.logger.entity,
                group=cfg.logger.group or f"{cfg.experiment_name}/{cfg.env.name}",
                name=run_name,
                tags=list(cfg.logger.tags),
                mode=cfg.logger.mode,
                dir=str(run_dir),
                # The same run dir always maps to the same W&B run id, so a resumed run continues it.
                id=hashlib.sha1(str(run_dir.resolve()).encode()).hexdigest()[:16],
                resume="allow",
                config=cast(dict[str, Any], OmegaConf.to_container(cfg, resolve=True)),
                reinit="finish_previous",
                settings=wandb.Settings(init_timeout=cfg.logger.init_timeout),
            )
        except Exception as error:  # noqa: BLE001 - any W&B failure must not stop training
            self._disable(error)

    def _disable(self, error: Exception) -> None:
        print(
            f"rlinfluence: W&B mirror disabled, metrics.csv continues ({type(error).__name__}: {error})",
            file=sys.stderr,
        )
        self.run = None

    def log(self, row: dict[str, Any]) -> None:
        if self.run is None:
            return
        data = {
            f"{section}/{key}": row[key]
            for section, keys in SECTIONS.items()
            for key in keys
            if key in row and not (isinstance(row[key], float) and math.isnan(row[key]))
        }
        try:
            self.run.log(data, step=int(row["round"]))
        except Exception as error:  # noqa: BLE001
            self._disable(error)

    def finish(self, summary: dict[str, Any] | None, exit_code: int) -> None:
        if self.run is None:
            return
        try:
            if summary:
                self.run.summary.update(summary)
            self.run.finish(exit_code=exit_code)
        except Exception as error:  # noqa: BLE001
            self._disable(error)


class RunLogger:
    def __init__(
        self, cfg: DictConfig, run_dir: Path, run_name: str, kept: list[dict[str, str]], columns: list[str] = COLUMNS
    ):
        """`kept`: the rows a resumed run keeps (`rows_to_resume`); the file restarts with them.
        `columns`: the agent's metrics.csv columns."""
        self.path = run_dir / METRICS
        self.columns = columns
        with open(self.path, "w", newline="") as handle:
            writer = csv.DictWriter(handle, columns)
            writer.writeheader()
            writer.writerows(kept)
        self.last_test_return: float | None = None  # of the latest evaluated round, resumed rows included
        for row in kept:
            self._remember(float(row["test_return"]))
        self.wandb = WandbMirror(cfg, run_dir, run_name)

    def _remember(self, test_return: float) -> None:
        if not math.isnan(test_return):
            self.last_test_return = test_return

    def log(self, row: dict[str, Any]) -> None:
        with open(self.path, "a", newline="") as handle:
            csv.DictWriter(handle, self.columns).writerow({key: row[key] for key in self.columns})
            handle.flush()
            os.fsync(handle.fileno())
        self._remember(float(row["test_return"]))
        self.wandb.log(row)

    def finish(self, summary: dict[str, Any] | None, exit_code: int) -> None:
        self.wandb.finish(summary, exit_code)
