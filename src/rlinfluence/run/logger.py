"""One logger per run: the local `metrics.csv` is the source of truth, W&B mirrors it.

Each round appends one flushed, fsynced CSV row. W&B (offline by default) gets the same numbers;
any W&B failure is reported once and the mirror switched off, so training never dies of logging.
A run with planted records (corruption.py) also appends each round's to `corruption.jsonl`: which
records were planted and how well the round found them; a clean run writes no such file.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO, cast

from omegaconf import DictConfig, OmegaConf

from rlinfluence.corruption import plants
from rlinfluence.round import COLUMNS
from rlinfluence.run.checkpoint import CORRUPTION, METRICS, unreadable

# A corrupted run's fields of each round (metrics.planted_detection), in corruption.jsonl and on W&B.
DETECTION = ("n_planted", "precision", "recall", "auroc_influence", "auroc_advantage")
# W&B panel sections, CleanRL style ("charts/...", "losses/...").
SECTIONS = {
    "charts": ("test_return", "test_return_sem", "train_return", "env_steps"),
    "selection": ("n_records", "n_kept", "n_negative", "kept_fraction", "gradient_steps", "influence_step_spearman"),
    "losses": ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction"),
    "time": ("time_collect", "time_influence", "time_select", "time_update", "time_eval", "time_forward"),
    "lm": ("test_toxicity", "test_toxicity_sem", "kl_coef", "mean_kl"),
    "corruption": DETECTION,
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
    require_rounds(path, rounds, 0, last_round)
    return rows


def require_rounds(path: Path, rounds: list[int], first: int, last_round: int) -> None:
    """RunDirError unless `rounds` (a log's, in order) are exactly first..`last_round`, the checkpoint's."""
    if rounds != list(range(first, last_round + 1)):
        raise unreadable(path, ValueError(f"rounds {first}-{last_round} of the checkpoint are not all in it"))


@contextmanager
def synced_append(path: Path) -> Iterator[TextIO]:
    """`path` opened to append, flushed and fsynced on close: a kill loses at most the line being written."""
    with open(path, "a", newline="") as handle:
        yield handle
        handle.flush()
        os.fsync(handle.fileno())


class CorruptionLog:
    """corruption.jsonl: one line per round from round 1, its planted record ids and `DETECTION` (NaN as
    null). It restarts with the lines of rounds 1..`last_round` (the checkpoint's), as metrics.csv does."""

    def __init__(self, path: Path, last_round: int):
        self.path = path
        kept = self._lines_to_resume(last_round) if last_round > 0 else []
        self.path.write_text("".join(f"{line}\n" for line in kept))

    def _lines_to_resume(self, last_round: int) -> list[str]:
        kept, rounds = [], []
        try:
            for line in self.path.read_text().splitlines():
                try:
                    k = int(json.loads(line)["round"])
                except json.JSONDecodeError:
                    continue  # a line cut short by a kill: a round after the checkpoint's, recomputed
                if k <= last_round:
                    kept.append(line)
                    rounds.append(k)
        except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as error:
            raise unreadable(self.path, error) from None
        require_rounds(self.path, rounds, 1, last_round)
        return kept

    def log(self, row: dict[str, Any]) -> None:
        fields = {key: None if math.isnan(row[key]) else row[key] for key in DETECTION}
        with synced_append(self.path) as handle:
            handle.write(json.dumps({"round": row["round"], **fields, "planted": row["planted"]}) + "\n")


DISABLED = "disabled"
LOGGER_MODES = ("offline", "online", DISABLED)  # logger.mode: wandb.init's modes, passed through to it


class WandbMirror:
    def __init__(self, cfg: DictConfig, run_dir: Path, run_name: str, among_seeds: bool = False):
        """`among_seeds`: one of several seeds trained in this process (engine=stacked). Their W&B runs share the
        process's console, so W&B's own lines (~36 a run) and its console capture (every seed's run would hold
        the others' output) are off; each says where it is in one line of ours instead."""
        self.run = None
        if cfg.logger.mode == DISABLED:
            return
        config = cast(dict[str, Any], OmegaConf.to_container(cfg, resolve=True))
        config.pop("seeds", None)  # which seeds share the process is not the seed's setting (nor its identity's)
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
                config=config,
                # A run object of its own, beside the process's other runs (engine=stacked: one per seed), used
                # through self.run only: W&B's global run is never set.
                reinit="create_new",
                settings=wandb.Settings(
                    init_timeout=cfg.logger.init_timeout,
                    silent=among_seeds,
                    console="off" if among_seeds else "auto",  # "auto": W&B's default
                ),
            )
        except Exception as error:  # noqa: BLE001 - any W&B failure must not stop training
            self._disable(error)
            return
        if among_seeds:
            print(f"rlinfluence: W&B run {self.run.id} ({cfg.logger.mode}) in {self.run.dir}", file=sys.stderr)

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
        self,
        cfg: DictConfig,
        run_dir: Path,
        run_name: str,
        kept: list[dict[str, str]],
        columns: list[str] = COLUMNS,
        among_seeds: bool = False,
    ):
        """`kept`: the rows a resumed run keeps (`rows_to_resume`); the file restarts with them.
        `columns`: the agent's metrics.csv columns. `among_seeds`: WandbMirror's."""
        self.path = run_dir / METRICS
        self.columns = columns
        with open(self.path, "w", newline="") as handle:
            writer = csv.DictWriter(handle, columns)
            writer.writeheader()
            writer.writerows(kept)
        self.last_test_return: float | None = None  # of the latest evaluated round, resumed rows included
        for row in kept:
            self._remember(float(row["test_return"]))
        self.corruption = (
            CorruptionLog(run_dir / CORRUPTION, len(kept) - 1) if plants(cfg.corruption.fraction) else None
        )
        self.wandb = WandbMirror(cfg, run_dir, run_name, among_seeds)

    def _remember(self, test_return: float) -> None:
        if not math.isnan(test_return):
            self.last_test_return = test_return

    def log(self, row: dict[str, Any]) -> None:
        with synced_append(self.path) as handle:
            csv.DictWriter(handle, self.columns).writerow({key: row[key] for key in self.columns})
        self._remember(float(row["test_return"]))
        if self.corruption is not None and "planted" in row:  # round 0 plants nothing
            self.corruption.log(row)
        self.wandb.log(row)

    def finish(self, summary: dict[str, Any] | None, exit_code: int) -> None:
        self.wandb.finish(summary, exit_code)
