"""`task=bottom_frames` (paper Fig. 9, Pong): what the records of most negative influence look like.

Round k of a standard-PPO run is replayed from its snapshot, the buffer θ_k collected is scored with the
IIF target (f_return) at θ_k, and its `analysis.bottom_frames.bottom` records of lowest influence are
written, the most negative first, with their observations (Pong: 4 stacked 84×84 uint8 frames). Unlike
task=diagnose it needs no settable state, only the buffer, so it serves envs like Pong whose state a
fresh env cannot be put into.

The rows go beside the run, as every analysis' (standard_run.write_rows), in an NPZ, one array per column:
a record's image does not fit a CSV row, and compressed frames keep the committed file small.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from omegaconf import DictConfig

from rlinfluence.analyses.standard_run import analyse_rounds, before_round, check_rounds
from rlinfluence.choices import ConfigError
from rlinfluence.control.engine import Seed
from rlinfluence.run.tasks import register

OBS = "obs"  # the column of the records' observations, one array per row


def bottom_round(trainer: Seed, run_dir: Path, k: int) -> pd.DataFrame:
    cfg = trainer.cfg
    before_round(trainer, run_dir, k)
    buffer = trainer.collect(k)
    scores = trainer.influence(buffer)
    bottom = np.argsort(scores, kind="stable")[: cfg.analysis.bottom_frames.bottom]
    return pd.DataFrame(
        {
            "env": cfg.env.name,
            "seed": cfg.seed,
            "round": k,
            "n_records": len(buffer),
            "rank": len(buffer) - np.arange(len(bottom)),  # by decreasing influence, as diagnose's
            "record": bottom,
            "influence": scores[bottom],
            "action": buffer.actions[bottom].numpy().astype(np.int64),
            "advantage_gae": buffer.advantages[bottom].numpy(),
            OBS: list(buffer.obs[bottom].numpy()),
        }
    )


def frames_bytes(rows: pd.DataFrame) -> bytes:
    """The rows as a compressed NPZ, one array per column."""
    # Through Python values: a text column (env) becomes a str array, which loads without pickle.
    # Any: numpy's stub types savez_compressed's keywords as its own flags
    arrays: dict[str, Any] = {name: np.asarray(rows[name].to_list()) for name in rows.columns if name != OBS}
    arrays[OBS] = np.stack(rows[OBS].to_list())
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    return buffer.getvalue()


def read_frames(path: Path) -> pd.DataFrame:
    """The rows `frames_bytes` wrote, the observations again one array per row."""
    with np.load(path) as data:
        rows = pd.DataFrame({name: data[name] for name in data.files if name != OBS})
        rows[OBS] = list(data[OBS])
    return rows


@register("bottom_frames")
def bottom_frames(cfg: DictConfig) -> pd.DataFrame:
    rounds = list(cfg.analysis.bottom_frames.rounds)
    check_rounds(cfg, "analysis.bottom_frames.rounds", rounds)
    if cfg.analysis.bottom_frames.bottom < 1:
        raise ConfigError(f"analysis.bottom_frames.bottom={cfg.analysis.bottom_frames.bottom} must be >= 1")
    return analyse_rounds(cfg, "bottom_frames", rounds, bottom_round, encode=frames_bytes, suffix=".npz")
