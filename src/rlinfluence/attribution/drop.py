"""Which records IIF drops, as a pure function of their scores (the trainer's selection methods)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from rlinfluence.selection import Attribute, DropMostNegative, DropRandom, KeepAll, SelectionMethod
from rlinfluence.share import FilterShare

# mode -> the selection method at p: IIF, as many records dropped at random, or attribution only
DROP_MODES: dict[str, Callable[[FilterShare], SelectionMethod]] = {
    "iif": DropMostNegative,
    "random": DropRandom,
    "none": lambda p: KeepAll(),
}
AUTO_MODES = ("iif",)  # p="auto": the drop count chosen on held-out records, as method.p=auto in the CLI


def check_drop_settings(mode: str, p: float | str) -> SelectionMethod:
    """The selection method of `mode` at `p`, or a one-line ValueError naming what is wrong."""
    if mode not in DROP_MODES:
        raise ValueError(f"mode={mode!r} is not one of: {', '.join(DROP_MODES)}")
    auto = mode in AUTO_MODES
    share = FilterShare.parse(p, "p", auto, "" if auto else f"; p=auto is for mode={', '.join(AUTO_MODES)}")
    if share.percent is not None and share.percent < 1:
        warnings.warn(
            f"p={share} is a percent of the negative-influence records: it drops {share}% of them, not a fraction; "
            f"for {share.percent:.0%} of them pass p={share.percent * 100:g}",
            UserWarning,
            stacklevel=3,
        )
    return DROP_MODES[mode](share)


def check_scores(scores: npt.ArrayLike) -> np.ndarray:
    """record_influence's output: one finite score per record, (N,), or a one-line ValueError."""
    array = np.asarray(scores)
    if array.ndim != 1:
        raise ValueError(f"scores has shape {array.shape}; it needs (N,), one score per record (record_influence's)")
    if array.size == 0:
        raise ValueError("scores is empty: there are no records to drop from")
    if not np.issubdtype(array.dtype, np.number) or not np.isfinite(array).all():
        raise ValueError(f"scores must be finite numbers (dtype {array.dtype}, NaN or inf found)")
    return array.astype(np.float64)


def drop_set(
    scores: npt.ArrayLike,
    p: float | str,
    mode: str = "iif",
    rng: np.random.Generator | int | None = None,
    *,
    attribute: Attribute | None = None,
) -> np.ndarray:
    """The ids of the records to leave out of the update, ascending; `p` is a percent of the NEGATIVE records.

    `iif`: the ⌊n_neg·p/100⌋ most negative scores, n_neg the number of negative ones (p=25 with half the
    scores negative drops about 12 % of the batch; a p in (0, 1) warns); with p="auto", as many of them as
    the held-out f_return predicts to help (the CLI's method.p=auto), which needs `attribute`, a function
    target -> every record's score (`functools.partial(record_influence, policy, module, records)`);
    `random`: as many ids drawn uniformly with `rng` (a Generator or an int seed, as
    `np.random.default_rng` takes; default: a fresh unseeded one); `none`: no id."""
    method = check_drop_settings(mode, p)
    checked = check_scores(scores)
    if isinstance(method, DropMostNegative) and method.p.is_auto and attribute is None:
        raise ValueError(
            "p='auto' needs attribute=functools.partial(record_influence, policy, module, records) "
            "(it scores the records on held-out halves of the buffer)"
        )
    held_out: Any = attribute
    if isinstance(rng, bool) or not (rng is None or isinstance(rng, (int, np.integer, np.random.Generator))):
        raise ValueError(f"rng={rng!r} must be a numpy Generator, an int seed or None, not {type(rng).__name__}")
    selection = method.select(checked, checked, np.random.default_rng(rng), held_out)
    return np.flatnonzero(~selection.keep)
