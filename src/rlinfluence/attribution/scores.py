"""`record_influence`: every record's influence on a target, for a policy given as a callable
observations -> torch Distribution and the module that holds its parameters.

Same definition and sign as influence.py: I_i = ⟨∇θ ℓ_i(θ), ∇θ L_f(θ)⟩ with ℓ_i the per-record PPO
policy loss (advantages normalised over the buffer) and L_f = −f; I_i > 0: a gradient step on record i
raises f. All scores come from one forward-mode pass (`influence.directional_scores`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import torch
from torch import nn
from torch.distributions import Distribution
from torch.func import functional_call

from rlinfluence.influence import Params, directional_scores, gradient
from rlinfluence.losses import normalize_advantages, policy_loss_per_record
from rlinfluence.targets import ActionTarget, PolicyFn, ReturnTarget

DistributionFn = Callable[[torch.Tensor], Distribution]
LossFn = Callable[[Params], torch.Tensor]  # the module's parameters by name -> a scalar loss L_f
TARGETS = ("return", "action")  # or a LossFn
RECORD_KEYS = ("observations", "actions", "old_log_probs", "advantages")
TARGET_RECORD_KEYS = ("observations", "actions", "advantages")  # f_return reads no log π_old


@dataclass(frozen=True)
class _Transitions:
    """A records mapping as the targets read it (targets.Transitions)."""

    obs: torch.Tensor
    actions: torch.Tensor
    advantages: torch.Tensor

    @classmethod
    def of(cls, records: Mapping[str, torch.Tensor], needed: tuple[str, ...], argument: str) -> _Transitions:
        missing = [key for key in needed if key not in records]
        if missing:
            raise ValueError(f"{argument} lack {', '.join(missing)} (needed: {', '.join(needed)})")
        return cls(records["observations"], records["actions"], records["advantages"])


def _per_record(values: torch.Tensor) -> torch.Tensor:
    """One value per record: a factorised distribution's per-dimension terms summed (as SB3 does)."""
    return values.flatten(1).sum(1) if values.ndim > 1 else values


class _Policy(nn.Module):
    """(obs, actions) -> (log π(a|s), entropy) of the user's policy, callable with substituted parameters."""

    def __init__(self, module: nn.Module, distribution: DistributionFn):
        super().__init__()
        self.module = module
        self.distribution = lambda obs: distribution(obs)  # a plain function: never registered as a submodule

    def forward(self, obs: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        distribution = self.distribution(obs)
        return _per_record(distribution.log_prob(actions)), _per_record(distribution.entropy())

    def at(self, params: Params) -> PolicyFn:
        return lambda obs, actions: functional_call(self, params, (obs, actions))


def check_target(target: str | LossFn, target_state: npt.ArrayLike | None, target_action: npt.ArrayLike | None) -> None:
    """A one-line ValueError for a target record_influence cannot compute."""
    if callable(target):
        return
    if target not in TARGETS:
        raise ValueError(f"target={target!r} is not one of: {', '.join(TARGETS)}, or a function params -> loss")
    if target == "action" and (target_state is None or target_action is None):
        raise ValueError("target='action' needs target_state and target_action (the s* and a* of f_action)")


def _target_loss(
    target: str | LossFn,
    policy: _Policy,
    records: _Transitions,
    target_records: Mapping[str, torch.Tensor] | None,
    target_state: npt.ArrayLike | None,
    target_action: npt.ArrayLike | None,
) -> LossFn:
    """L_f as a function of the (prefixed) parameters."""
    if callable(target):
        return lambda params: target({name.removeprefix("module."): value for name, value in params.items()})
    if target == "return":
        on = (
            records if target_records is None else _Transitions.of(target_records, TARGET_RECORD_KEYS, "target_records")
        )
        return lambda params: ReturnTarget().loss(policy.at(params), on)
    assert target == "action" and target_state is not None and target_action is not None  # check_target
    action_target = ActionTarget(target_state, target_action)
    return lambda params: action_target.loss(policy.at(params), records)


def record_influence(
    policy: DistributionFn,
    module: nn.Module,
    records: Mapping[str, torch.Tensor],
    target: str | LossFn = "return",
    *,
    clip_range: float = 0.2,
    ent_coef: float = 0.0,
    target_records: Mapping[str, torch.Tensor] | None = None,
    target_state: npt.ArrayLike | None = None,
    target_action: npt.ArrayLike | None = None,
    parameters: Iterable[str] | None = None,
    chunk_size: int = 4096,
) -> np.ndarray:
    """Each record's influence on the target, at the module's current parameters θ (one float per record).

    policy: observations -> torch Distribution, computed from `module`'s parameters (log_prob and
        entropy of a factorised distribution are summed over the action dimensions).
    records: `observations` (N, ...), `actions` (as the distribution's log_prob takes them),
        `old_log_probs` (N,) of the policy that collected them, raw `advantages` (N,) (normalised
        over the buffer for the per-record loss, as our trainer does).
    target: "return" (f_return: E[log π(a|s)·Â] over `target_records`, default the same records),
        "action" (f_action = log π(target_action | target_state)), or a function of the module's
        parameters by name (as `torch.func.functional_call(module, params, ...)` takes them) that
        returns the scalar loss L_f = −f.
    clip_range, ent_coef: the PPO loss's (at θ_k, where π = π_old, the clip is inactive).
    parameters: the names of the parameters to attribute through (default: all that require grad).
    """
    check_target(target, target_state, target_action)
    transitions = _Transitions.of(records, RECORD_KEYS, "records")
    wrapped = _Policy(module, policy)
    named = dict(module.named_parameters())
    names = [name for name, value in named.items() if value.requires_grad] if parameters is None else list(parameters)
    unknown = [name for name in names if name not in named]
    if unknown:
        raise ValueError(f"parameters={unknown} are not parameters of the module (it has: {', '.join(named)})")
    params = {f"module.{name}": named[name].detach() for name in names}
    target_loss = _target_loss(target, wrapped, transitions, target_records, target_state, target_action)
    direction = gradient(target_loss, params)
    old_log_probs, advantages = records["old_log_probs"], normalize_advantages(records["advantages"])

    def per_record_loss(params: Params, ids: slice) -> torch.Tensor:
        log_prob, entropy = wrapped.at(params)(transitions.obs[ids], transitions.actions[ids])
        return policy_loss_per_record(log_prob, old_log_probs[ids], advantages[ids], clip_range, entropy, ent_coef)

    scores = directional_scores(per_record_loss, params, direction, len(transitions.obs), chunk_size)
    return scores.cpu().double().numpy()
