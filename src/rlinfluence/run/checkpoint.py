"""A run dir's files: atomic checkpoints and small result files (write to a temporary file, fsync,
then rename), and reading the checkpoint back.

A reader (or a resumed run after `kill -9`) sees either the previous file or the new one, never
half of one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch

CHECKPOINT, METRICS, SUMMARY = "checkpoint.pt", "metrics.csv", "summary.json"
CORRUPTION = "corruption.jsonl"  # planted records (corruption.py): per round, which, and how well they were found
DONE = "DONE"  # written last: the run finished
RESULTS = (CHECKPOINT, METRICS, CORRUPTION, SUMMARY, DONE)  # what makes a run dir more than an empty folder
SNAPSHOTS = "snapshots"  # checkpoint.snapshots=true: snapshots/round<k>.pt, the checkpoint as it was after round k
RESTART = "force=true restarts the run from scratch, deleting its results"


class RunDirError(RuntimeError):
    """A run dir whose state this command cannot continue; the message is one line with the way out."""


def unreadable(path: Path, error: Exception) -> RunDirError:
    """The refusal for a file of the run that cannot be read back: which file, why, and the choice."""
    reason = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return RunDirError(f"{path} is unreadable ({type(error).__name__}{': ' + reason if reason else ''}); {RESTART}")


def _atomic_write(path: Path, write) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as handle:
        write(handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def save_checkpoint(run_dir: Path, state: dict[str, Any]) -> None:
    _atomic_write(run_dir / CHECKPOINT, lambda handle: torch.save(state, handle))


def snapshot_path(run_dir: Path, k: int) -> Path:
    return run_dir / SNAPSHOTS / f"round{k:03d}.pt"


def save_snapshot(run_dir: Path, state: dict[str, Any]) -> None:
    """A copy of round k's checkpoint that later rounds do not overwrite. Written before the checkpoint,
    so a run killed between the two redoes round k and writes the same snapshot again."""
    path = snapshot_path(run_dir, int(state["round"]))
    path.parent.mkdir(exist_ok=True)
    _atomic_write(path, lambda handle: torch.save(state, handle))


def load_snapshot(run_dir: Path, k: int) -> dict[str, Any]:
    state = _load_state(snapshot_path(run_dir, k))
    if state is None:
        raise RunDirError(
            f"{snapshot_path(run_dir, k)} does not exist: the run kept no snapshot of round {k} "
            f"(train it with checkpoint.snapshots=true; force=true if it finished without)"
        )
    return state


def load_checkpoint(run_dir: Path) -> dict[str, Any] | None:
    """The run's last checkpoint, None when it has none; RunDirError when the file cannot be read
    (truncated, emptied, not ours): resuming without it would silently discard the run's progress."""
    return _load_state(run_dir / CHECKPOINT)


def _load_state(path: Path) -> dict[str, Any] | None:
    if not path.exists():
        return None
    try:
        # weights_only=False: the state holds numpy RNG states and env action histories, written by us.
        # map_location: a run checkpointed on a GPU resumes on any machine (load_state_dict moves it back).
        state = torch.load(path, weights_only=False, map_location="cpu")
        int(state["round"])
    except Exception as error:  # noqa: BLE001 - whatever the reason, the file cannot be resumed from
        raise unreadable(path, error) from None
    return state


def write_bytes(path: Path, content: bytes) -> None:
    _atomic_write(path, lambda handle: handle.write(content))


def write_json(path: Path, data: dict[str, Any]) -> None:
    _atomic_write(path, lambda handle: handle.write(json.dumps(data, indent=2, sort_keys=True).encode()))
