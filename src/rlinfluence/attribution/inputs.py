"""The attribution API's input contract: each key of `records` checked and converted once, or refused.

| key | layout | dtype |
|---|---|---|
| observations | (N, *obs_shape); a Dict space: a dict of such arrays | floats → the module's; integers kept |
| actions | (N, *action_shape) (`ActionLayout`; a Categorical's (N, 1) squeezed) | whole numbers if discrete |
| old_log_probs | (N,) (an (N, 1) column is squeezed) | float, finite |
| advantages | (N,) raw (an (N, 1) column is squeezed) | float, finite |

action_shape is what the policy's distribution samples for one record: () for a Categorical, (act_dim,)
for a Gaussian over act_dim dimensions; it is read off the distribution at the first observation.
Each may be a torch tensor or a numpy array. The time-major (T, n_envs, ...) layout of SB3's and CleanRL's
buffers is refused, naming the reshape that flattens it: the API cannot tell which axis is time, and record
ids are positions in the flat layout. Every refusal is one ValueError naming the key, the shape it got and
the shape it needs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from torch.distributions import Distribution
from torch.distributions.constraints import Constraint

from rlinfluence.records import Observations, take

FLATTEN_HINT = "flatten (T, n_envs, ...) buffers to (T * n_envs, ...) first, e.g. x.reshape(-1, *x.shape[2:])"


def _tensor(key: str, value: Any, device: torch.device, float_dtype: torch.dtype) -> torch.Tensor:
    """A torch tensor or numpy array as a tensor on `device`, floats in `float_dtype`, checked finite."""
    if not isinstance(value, torch.Tensor):
        array = np.asarray(value)
        if array.dtype == object or not (np.issubdtype(array.dtype, np.number) or array.dtype == bool):
            raise ValueError(f"{key} must be a numeric torch tensor or numpy array, not {type(value).__name__}")
        value = torch.from_numpy(np.ascontiguousarray(array))
    if value.is_floating_point():
        value = value.to(float_dtype)
        if not bool(torch.isfinite(value).all()):
            raise ValueError(f"{key} holds NaN or inf (shape {tuple(value.shape)}): every value must be finite")
    return value.to(device)


def _rows(key: str, value: Observations) -> int:
    if isinstance(value, dict):
        counts = {name: len(array) if array.ndim else 0 for name, array in value.items()}
        if len(set(counts.values())) > 1:
            raise ValueError(f"{key} has keys with different numbers of rows: {counts}")
        return next(iter(counts.values()), 0)
    return value.shape[0] if value.ndim else 0


def _column(key: str, value: torch.Tensor, n: int) -> torch.Tensor:
    """One float per record: (N,) or an (N, 1) column, squeezed."""
    if value.ndim == 2 and value.shape[1] == 1:
        value = value[:, 0]
    if value.ndim == 2 and value.shape[0] == n:
        # Time-major observations too (N counted their T rows): the records are T * n_envs once flattened.
        raise ValueError(
            f"{key} has shape {tuple(value.shape)}; it needs ({value.numel()},), one value per record (every key "
            f"flattened alike); {FLATTEN_HINT}"
        )
    if value.ndim != 1 or value.shape[0] != n:
        hint = f"; {FLATTEN_HINT}" if value.ndim == 2 else ""
        raise ValueError(f"{key} has shape {tuple(value.shape)}; it needs ({n},), one value per record{hint}")
    if not value.is_floating_point():
        raise ValueError(f"{key} has dtype {value.dtype}; it needs floats")
    return value


@dataclass(frozen=True)
class ActionLayout:
    """What the policy's distribution takes as one record's action, read off the distribution itself."""

    shape: tuple[int, ...]  # () for Categorical, (act_dim,) for a Gaussian over act_dim dimensions
    discrete: bool  # whole-number actions (Categorical, Bernoulli): passed as int64
    support: Constraint | None  # the actions the distribution takes (its log_prob refuses others)

    @classmethod
    def of(cls, distribution: Callable[[Observations], Distribution], observations: Observations) -> ActionLayout:
        # Two observations, not one: a batch axis added in front (Categorical(logits=net(obs)[None])) then
        # shows as batch shape (1, 2), where one observation's (1, 1) would pass for an action axis.
        rows = min(2, _rows("observations", observations))
        with torch.no_grad():
            probe = distribution(take(observations, slice(0, rows)))
        if not isinstance(probe, Distribution):
            raise ValueError(f"policy(observations) must return a torch Distribution, not {type(probe).__name__}")
        sample_shape = tuple(probe.batch_shape + probe.event_shape)
        if not sample_shape or sample_shape[0] != rows:
            raise ValueError(
                f"policy(observations[:{rows}]) gave a distribution of batch shape {tuple(probe.batch_shape)}; it "
                f"needs one distribution per observation, batch shape ({rows}, ...) (the first axis is the records)"
            )
        support = probe.support
        return cls(sample_shape[1:], bool(support is not None and support.is_discrete), support)

    def describe(self, n: int) -> str:
        return str((n, *self.shape))

    def check(self, key: str, value: torch.Tensor, n: int | None, float_dtype: torch.dtype) -> torch.Tensor:
        """`value` as the distribution's log_prob takes it: (n, *shape), int64 for a discrete one."""
        rows = value.shape[0] if value.ndim else 0
        n = rows if n is None else n
        if self.shape == () and value.shape == (n, 1):
            value = value[:, 0]  # SB3's Discrete layout
        elif self.shape == (1,) and value.shape == (n,):
            value = value[:, None]  # a one-dimensional Box given flat
        if tuple(value.shape) != (n, *self.shape):
            hint = f"; {FLATTEN_HINT}" if value.ndim == len(self.shape) + 2 else ""
            raise ValueError(
                f"{key} has shape {tuple(value.shape)}; the policy's distribution takes {self.describe(n)}{hint}"
            )
        if self.discrete and value.is_floating_point() and not bool((value == value.round()).all()):
            raise ValueError(f"{key} holds non-integer values; the policy's distribution is discrete")
        value = value.long() if self.discrete else value.to(float_dtype)
        self.check_support(key, value)
        return value

    def check_support(self, key: str, value: torch.Tensor) -> None:
        """Torch's own refusal of an action outside the support is many lines, ending in the whole tensor."""
        if self.support is None:
            return
        outside = ~self.support.check(value)
        if bool(outside.any()):
            record = int(outside.reshape(len(value), -1).any(1).nonzero()[0, 0])
            raise ValueError(
                f"{key} holds actions outside the policy's distribution's support {self.support} "
                f"({int(outside.sum())} of them, the first at record {record}: {value[record].tolist()})"
            )


@dataclass(frozen=True)
class CheckedRecords:
    """Records as the scoring reads them: every key on the module's device, in the contract's layout."""

    obs: Observations
    actions: torch.Tensor
    advantages: torch.Tensor
    old_log_probs: torch.Tensor | None  # None for target records (f_return reads no log π_old)
    layout: ActionLayout

    def __len__(self) -> int:
        return len(self.advantages)


def check_records(
    argument: str,
    records: Mapping[str, Any],
    needed: tuple[str, ...],
    distribution: Callable[[Observations], Distribution],
    device: torch.device,
    float_dtype: torch.dtype,
) -> CheckedRecords:
    """`records` (the argument named `argument`) checked against the contract, or one ValueError."""
    if not isinstance(records, Mapping):
        raise ValueError(f"{argument} must be a mapping of {', '.join(needed)}, not {type(records).__name__}")
    missing = [key for key in needed if key not in records]
    if missing:
        raise ValueError(f"{argument} lack {', '.join(missing)} (needed: {', '.join(needed)})")

    def key(name: str) -> str:
        return f"{argument}[{name!r}]"

    raw_obs = records["observations"]
    obs: Observations = (
        {name: _tensor(f"{key('observations')}[{name!r}]", v, device, float_dtype) for name, v in raw_obs.items()}
        if isinstance(raw_obs, Mapping)
        else _tensor(key("observations"), raw_obs, device, float_dtype)
    )
    n = _rows(key("observations"), obs)
    if n == 0:
        raise ValueError(f"{key('observations')} has no rows: there are no records to score")
    layout = ActionLayout.of(distribution, obs)
    actions = layout.check(
        key("actions"), _tensor(key("actions"), records["actions"], device, float_dtype), n, float_dtype
    )
    advantages = _column(key("advantages"), _tensor(key("advantages"), records["advantages"], device, float_dtype), n)
    old_log_probs = None
    if "old_log_probs" in needed:
        raw = _tensor(key("old_log_probs"), records["old_log_probs"], device, float_dtype)
        old_log_probs = _column(key("old_log_probs"), raw, n)
    return CheckedRecords(obs, actions, advantages, old_log_probs, layout)


def check_target_state(target_state: npt.ArrayLike | Mapping[str, npt.ArrayLike], like: Observations) -> Observations:
    """s* of f_action as a batch of one in the records' observation layout (a flat list is reshaped)."""

    def one(name: str, values: Any, rows: torch.Tensor) -> torch.Tensor:
        state = _tensor(name, values, rows.device, rows.dtype if rows.is_floating_point() else torch.float32)
        shape = tuple(rows.shape[1:])
        if state.numel() != math.prod(shape):
            raise ValueError(
                f"{name} has shape {tuple(state.shape)} ({state.numel()} values); "
                f"the observations are {shape} ({math.prod(shape)} values)"
            )
        return state.reshape(1, *shape).to(rows.dtype)

    if isinstance(like, dict):
        if not isinstance(target_state, Mapping) or set(target_state) != set(like):
            raise ValueError(f"target_state must be a dict with the observation keys {sorted(like)}")
        return {name: one(f"target_state[{name!r}]", target_state[name], like[name]) for name in like}
    if isinstance(target_state, Mapping):
        raise ValueError("target_state is a dict but the observations are not")
    return one("target_state", target_state, like)


def check_target_action(target_action: npt.ArrayLike, layout: ActionLayout, float_dtype: torch.dtype) -> torch.Tensor:
    """a* of f_action as a batch of one, as the policy's distribution takes an action (on the CPU; the
    target moves it to the records' device)."""
    action = _tensor("target_action", target_action, torch.device("cpu"), float_dtype)
    if action.numel() != math.prod(layout.shape):
        raise ValueError(
            f"target_action has shape {tuple(action.shape)}; the policy's distribution takes {layout.shape or '()'} "
            "for one action"
        )
    return layout.check("target_action", action.reshape(1, *layout.shape), 1, float_dtype)
