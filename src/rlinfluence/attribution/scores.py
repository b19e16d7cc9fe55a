"""`record_influence`: every record's influence on a target, for a policy given as a callable
observations -> torch Distribution and the module that holds its parameters.

Same definition and sign as influence.py: I_i = ⟨∇θ ℓ_i(θ), ∇θ L_f(θ)⟩ with ℓ_i the per-record PPO
policy loss (advantages normalised over the buffer) and L_f = −f; I_i > 0: a gradient step on record i
raises f. All scores come from one forward-mode pass (`influence.directional_scores`). The inputs are
checked against the contract of `attribution/inputs.py` (docs/api.md) first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from torch import nn
from torch.distributions import Distribution
from torch.func import functional_call

from rlinfluence.attribution.inputs import CheckedRecords, check_records, check_target_action, check_target_state
from rlinfluence.influence import Params, directional_scores, gradient
from rlinfluence.losses import normalize_advantages, policy_loss_per_record
from rlinfluence.records import Observations, take
from rlinfluence.targets import ActionTarget, PolicyFn, ReturnTarget, Target

DistributionFn = Callable[[Observations], Distribution]
LossFn = Callable[[Params], torch.Tensor]  # the module's parameters by name -> a scalar loss L_f
TARGETS = ("return", "action")  # or a LossFn, or a Target (targets.py: ReturnTarget(ids), ActionTarget, ...)
RECORD_KEYS = ("observations", "actions", "old_log_probs", "advantages")
TARGET_RECORD_KEYS = ("observations", "actions", "advantages")  # f_return reads no log π_old


def _per_record(values: torch.Tensor) -> torch.Tensor:
    """One value per record: a factorised distribution's per-dimension terms summed (as SB3 does)."""
    return values.flatten(1).sum(1) if values.ndim > 1 else values


class _Policy(nn.Module):
    """(obs, actions) -> (log π(a|s), entropy) of the user's policy, callable with substituted parameters."""

    def __init__(self, module: nn.Module, distribution: DistributionFn):
        super().__init__()
        self.module = module
        self.distribution = lambda obs: distribution(obs)  # a plain function: never registered as a submodule

    def forward(self, obs: Observations, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        distribution = self.distribution(obs)
        return _per_record(distribution.log_prob(actions)), _per_record(distribution.entropy())

    def at(self, params: Params) -> PolicyFn:
        return lambda obs, actions: functional_call(self, params, (obs, actions))


def _read_leaves(output: torch.Tensor) -> list[torch.Tensor]:
    """The tensors requiring grad that `output` was computed from: the leaves of its autograd graph."""
    leaves, seen, stack = [], set(), [output.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        if hasattr(node, "variable"):  # AccumulateGrad: a leaf
            leaves.append(node.variable)
        stack.extend(next_node for next_node, _ in node.next_functions)
    return leaves


def check_parameters_read(
    distribution: DistributionFn, module: nn.Module, names: list[str], records: CheckedRecords
) -> None:
    """The scores differentiate `names` of `module` only: a parameter the policy reads from elsewhere (CleanRL's
    `actor_logstd` beside `actor_mean` as the module) would silently be a constant, and parameters the log-prob
    does not read (a critic's) give all-zero scores. Which tensors the log-prob reads is read off its autograd
    graph at the first two records: one forward pass, no gradient."""
    rows = slice(0, 2)
    with torch.enable_grad():
        log_prob = distribution(take(records.obs, rows)).log_prob(records.actions[rows])
    held = {id(value): name for name, value in module.named_parameters()}
    read = _read_leaves(log_prob)
    foreign = [tuple(leaf.shape) for leaf in read if id(leaf) not in held]
    if foreign:
        raise ValueError(
            f"policy reads {len(foreign)} tensor(s) requiring grad that module does not hold (shapes {foreign}): "
            "pass a module holding every parameter the policy reads (e.g. the whole agent, choosing with "
            "parameters=), or rlinfluence.attribution.cleanrl_policy(agent) for a CleanRL agent"
        )
    if not any(held[id(leaf)] in names for leaf in read):
        raise ValueError(
            f"parameters={names} are none of the parameters the policy's log-prob reads "
            f"({', '.join(sorted(held[id(leaf)] for leaf in read)) or 'none: is it computed under no_grad?'}): "
            "every score would be exactly 0"
        )


def _check_coefficient(name: str, value: Any, low: float, strict: bool, default: float, meaning: str) -> float:
    number = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    if not number or not np.isfinite(value) or value < low or (strict and value == low):
        bound = f"> {low:g}" if strict else f">= {low:g}"
        raise ValueError(f"{name}={value!r} must be a finite number {bound} ({meaning}; default {default:g})")
    return float(value)


def _is_target(target: Any) -> bool:
    return hasattr(target, "loss")  # a targets.py Target: loss(policy_fn, transitions)


def check_target(target: Any, target_state: Any, target_action: Any) -> None:
    """A one-line ValueError for a target record_influence cannot compute."""
    if callable(target) or _is_target(target):
        return
    if target not in TARGETS:
        raise ValueError(f"target={target!r} is not one of: {', '.join(TARGETS)}, or a function params -> loss")
    if target == "action" and (target_state is None or target_action is None):
        raise ValueError("target='action' needs target_state and target_action (the s* and a* of f_action)")


def _target_loss(
    target: str | LossFn | Target,
    policy: _Policy,
    distribution: DistributionFn,
    records: CheckedRecords,
    target_records: Mapping[str, Any] | None,
    target_state: Any,
    target_action: npt.ArrayLike | None,
) -> LossFn:
    """L_f as a function of the (prefixed) parameters."""
    if _is_target(target):
        of_records: Target = target  # type: ignore[assignment]  # _is_target checked it
        return lambda params: of_records.loss(policy.at(params), records)
    if callable(target):
        user_loss = target
        return lambda params: user_loss({name.removeprefix("module."): value for name, value in params.items()})
    if target == "return":
        on = records
        if target_records is not None:
            dtype, device = records.advantages.dtype, records.advantages.device
            on = check_records("target_records", target_records, TARGET_RECORD_KEYS, distribution, device, dtype)
        return lambda params: ReturnTarget().loss(policy.at(params), on)
    assert target == "action" and target_state is not None and target_action is not None  # check_target
    action_target = ActionTarget(
        check_target_state(target_state, records.obs),
        check_target_action(target_action, records.layout, records.advantages.dtype),
    )
    return lambda params: action_target.loss(policy.at(params), records)


def record_influence(
    policy: DistributionFn,
    module: nn.Module,
    records: Mapping[str, Any],
    target: str | LossFn | Target = "return",
    *,
    clip_range: float = 0.2,
    ent_coef: float = 0.0,
    target_records: Mapping[str, Any] | None = None,
    target_state: npt.ArrayLike | Mapping[str, npt.ArrayLike] | None = None,
    target_action: npt.ArrayLike | None = None,
    parameters: Iterable[str] | None = None,
    chunk_size: int = 4096,
) -> np.ndarray:
    """Each record's influence on the target, at the module's current parameters θ: a float64 array (N,).

    policy: observations -> torch Distribution, computed from `module`'s parameters (log_prob and
        entropy of a factorised distribution are summed over the action dimensions).
    records: `observations`, `actions`, `old_log_probs` (of the policy that collected them) and raw
        `advantages` (normalised over the buffer for the per-record loss, as our trainer does), torch
        tensors or numpy arrays in the layouts of docs/api.md; anything else is one ValueError.
    target: "return" (f_return: E[log π(a|s)·Â] over `target_records`, default the same records),
        "action" (f_action = log π(target_action | target_state)), a function of the module's
        parameters by name (as `torch.func.functional_call(module, params, ...)` takes them) that
        returns the scalar loss L_f = −f, or a targets.py Target (e.g. `ReturnTarget(ids)`: f_return
        over the records `ids` only, what `drop_set(p="auto")` asks for).
    clip_range, ent_coef: the PPO loss's (at θ_k, where π = π_old, the clip is inactive).
    parameters: the names of the parameters to attribute through (default: all that require grad).
    """
    check_target(target, target_state, target_action)
    clip_range = _check_coefficient("clip_range", clip_range, 0, True, 0.2, "PPO's clip range ε")
    ent_coef = _check_coefficient("ent_coef", ent_coef, 0, False, 0.0, "the entropy bonus's weight")
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunk_size={chunk_size!r} must be a positive int (records per forward-mode pass)")
    named = dict(module.named_parameters())
    names = [name for name, value in named.items() if value.requires_grad] if parameters is None else list(parameters)
    unknown = [name for name in names if name not in named]
    if unknown:
        raise ValueError(f"parameters={unknown} are not parameters of the module (it has: {', '.join(named)})")
    if not names:
        raise ValueError("the module has no parameters that require grad: there is nothing to attribute through")
    params = {f"module.{name}": named[name].detach() for name in names}
    first = params[f"module.{names[0]}"]
    float_dtype = first.dtype if first.is_floating_point() else torch.float32
    checked = check_records("records", records, RECORD_KEYS, policy, first.device, float_dtype)
    check_parameters_read(policy, module, names, checked)
    wrapped = _Policy(module, policy)
    target_loss = _target_loss(target, wrapped, policy, checked, target_records, target_state, target_action)
    direction = gradient(target_loss, params)
    assert checked.old_log_probs is not None  # RECORD_KEYS holds it
    old_log_probs, advantages = checked.old_log_probs, normalize_advantages(checked.advantages)

    def per_record_loss(params: Params, ids: slice) -> torch.Tensor:
        log_prob, entropy = wrapped.at(params)(take(checked.obs, ids), checked.actions[ids])
        return policy_loss_per_record(log_prob, old_log_probs[ids], advantages[ids], clip_range, entropy, ent_coef)

    scores = directional_scores(per_record_loss, params, direction, len(checked), chunk_size)
    return scores.cpu().double().numpy()
