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


def load_checkpoint(run_dir: Path) -> dict[str, Any] | None:
    """The run's last checkpoint, None when it has none; RunDirError when the file cannot be read
    (truncated, emptied, not ours): resuming without it would silently discard the run's progress."""
    path = run_dir / CHECKPOINT
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


def write_json(path: Path, data: dict[str, Any]) -> None:
    _atomic_write(path, lambda handle: handle.write(json.dumps(data, indent=2, sort_keys=True).encode()))
