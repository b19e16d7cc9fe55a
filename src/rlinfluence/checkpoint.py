"""Atomic checkpoints and small result files: write to a temporary file, fsync, then rename.

A reader (or a resumed run after `kill -9`) sees either the previous file or the new one, never
half of one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch

CHECKPOINT = "checkpoint.pt"


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
    path = run_dir / CHECKPOINT
    # weights_only=False: the state holds numpy RNG states and env action histories, written by us.
    # map_location: a run checkpointed on a GPU resumes on any machine (load_state_dict moves it back).
    return torch.load(path, weights_only=False, map_location="cpu") if path.exists() else None


def write_json(path: Path, data: dict[str, Any]) -> None:
    _atomic_write(path, lambda handle: handle.write(json.dumps(data, indent=2, sort_keys=True).encode()))
