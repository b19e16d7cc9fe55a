"""Which records IIF drops, as a pure function of their scores (the trainer's selection methods)."""

from __future__ import annotations

import numpy as np

from rlinfluence.selection import DropMostNegative, DropRandom, KeepAll, SelectionMethod

# mode -> the selection method at p: IIF, as many records dropped at random, or attribution only
DROP_MODES = {
    "iif": DropMostNegative,
    "random": DropRandom,
    "none": lambda p: KeepAll(),
}


def check_drop_settings(mode: str, p: float) -> SelectionMethod:
    """The selection method of `mode` at `p`, or a one-line ValueError naming what is wrong."""
    if mode not in DROP_MODES:
        raise ValueError(f"mode={mode!r} is not one of: {', '.join(DROP_MODES)}")
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 < p <= 100:
        raise ValueError(f"p={p!r} must be in (0, 100] (percent of negative-influence records to drop)")
    return DROP_MODES[mode](p)


def drop_set(scores: np.ndarray, p: float, mode: str = "iif", rng: np.random.Generator | None = None) -> np.ndarray:
    """The ids of the records to leave out of the update, ascending.

    `iif`: the ⌊n_neg·p/100⌋ most negative scores (ties by id); `random`: as many ids drawn uniformly
    with `rng` (default: a fresh unseeded one); `none`: no id."""
    method = check_drop_settings(mode, p)
    scores = np.asarray(scores)
    selection = method.select(scores, scores, rng if rng is not None else np.random.default_rng())
    return np.flatnonzero(~selection.keep)
