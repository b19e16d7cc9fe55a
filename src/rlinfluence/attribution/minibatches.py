"""The update's side of IIF in your own PPO loop: one epoch's minibatches of the kept records.

    for ids in kept_minibatches(kept, minibatch_size, rng):   # kept = the ids drop_set left
        advantages = normalize_advantages(b_advantages[ids])  # per minibatch, as CleanRL and SB3 do

Dropping records leaves a kept count that minibatch_size rarely divides. CleanRL's
`range(0, len(ids), minibatch_size)` then ends in a short minibatch, and one of a single record has
advantage std NaN, which its normalisation spreads over the loss (a crash in Normal(loc=nan)).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt


def kept_minibatches(
    kept_ids: npt.ArrayLike, minibatch_size: int, rng: np.random.Generator | int | None = None
) -> list[np.ndarray]:
    """The kept record ids shuffled with `rng` (a Generator or an int seed) into minibatches of `minibatch_size`,
    never one of a single record: a 1-record tail joins the minibatch before it (which then has
    minibatch_size + 1). No kept record: no minibatch; a single kept record: ValueError (no minibatch can hold
    it without a NaN advantage std). Call it once per epoch."""
    ids = np.asarray(kept_ids)
    if ids.ndim != 1 or not (ids.size == 0 or np.issubdtype(ids.dtype, np.integer)):
        raise ValueError(f"kept_ids must be a 1-D array of record ids (ints), got shape {ids.shape} of {ids.dtype}")
    if isinstance(minibatch_size, bool) or not isinstance(minibatch_size, (int, np.integer)) or minibatch_size < 2:
        raise ValueError(
            f"minibatch_size={minibatch_size!r} must be an int >= 2 (a 1-record minibatch's advantage std is NaN)"
        )
    if len(ids) == 1:
        raise ValueError(
            "kept_ids holds a single record: its advantage std is NaN, so it cannot be trained on alone "
            "(drop it too, or keep more)"
        )
    order = np.random.default_rng(rng).permutation(ids)
    starts = list(range(0, len(order), minibatch_size))
    if len(starts) > 1 and len(order) % minibatch_size == 1:
        starts.pop()  # the 1-record tail joins the minibatch before it
    return [order[start:end] for start, end in zip(starts, [*starts[1:], len(order)])]
