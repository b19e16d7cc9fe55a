"""Attribution targets: differentiable functions of the policy, written as losses L_f = −f.

Each target maps a `policy_fn(obs, actions) -> (log π(a|s), entropy)` evaluated at some
parameters, plus the round's buffer, to a scalar. Influence differentiates it at θ_k.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np
import numpy.typing as npt
import torch

from rlinfluence.choices import chosen
from rlinfluence.losses import normalize_advantages, policy_loss_per_record
from rlinfluence.records import Observations, observations_to, take

if TYPE_CHECKING:  # the config's type only: the attribution API uses targets without Hydra or OmegaConf
    from rlinfluence.config.schema import TargetConfig

PolicyFn = Callable[[Observations, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


class Transitions(Protocol):
    """What a target reads of a buffer: our `RolloutBuffer`, or any on-policy buffer (rlinfluence.attribution)."""

    @property
    def obs(self) -> Observations: ...
    @property
    def actions(self) -> torch.Tensor: ...
    @property
    def advantages(self) -> torch.Tensor: ...


class Target(Protocol):
    def loss(self, policy_fn: PolicyFn, buffer: Transitions) -> torch.Tensor: ...


class ReturnTarget:
    """f_return = E_{(s,a)~π_θk}[log π_θ(a|s) · Â(s,a)] over the round's own buffer, raw GAE Â.

    Its gradient is the policy-gradient estimate of the expected return at θ_k: the IIF default.
    `ids` restricts the mean to those records (a held-out part of the buffer, for method.p=auto).
    """

    def __init__(self, ids: np.ndarray | None = None):
        self.ids = None if ids is None else torch.as_tensor(ids, dtype=torch.long)

    def loss(self, policy_fn: PolicyFn, buffer: Transitions) -> torch.Tensor:
        obs, actions, advantages = buffer.obs, buffer.actions, buffer.advantages
        if self.ids is not None:
            ids = self.ids.to(advantages.device)
            obs, actions, advantages = take(obs, ids), actions[ids], advantages[ids]
        log_prob, _ = policy_fn(obs, actions)
        return -(advantages * log_prob).mean()


class EntropyTarget:
    """f_entropy = the mean entropy of π_θ(·|s) over the buffer's states. A record's influence on it is
    the first-order change of the policy's randomness that training on the record causes (< 0: the
    record makes the policy more deterministic); the entropy guard of robust IIF sums it."""

    def loss(self, policy_fn: PolicyFn, buffer: Transitions) -> torch.Tensor:
        _, entropy = policy_fn(buffer.obs, buffer.actions)
        return -entropy.mean()


@dataclass(frozen=True)
class UpdateLossTarget:
    """L_f = the round's own mean PPO policy loss L̄ = (1/N) Σ_j ℓ_j over its buffer (losses.py's ℓ, Â
    normalised over the buffer as the influence's per-record losses are; ent_coef's bonus included). Its
    gradient at θ_k is ḡ, the direction the round's update starts in on its own records: no target, no
    held-out data. A record's influence on it, ⟨∇ℓ_i, ḡ⟩, says how far the record agrees with the
    round's consensus (method=consensus).

    π_old is taken as π at the parameters the loss is evaluated at, so that at θ_k, where the round-start
    scores are taken, the ratio is 1, the clip is inactive and ḡ is exactly the mean of the records'
    ∇ℓ_i. (Under influence.normalization=chunk those normalise Â within chunks and ḡ over the buffer.)"""

    clip_range: float
    ent_coef: float

    def loss(self, policy_fn: PolicyFn, buffer: Transitions) -> torch.Tensor:
        log_prob, entropy = policy_fn(buffer.obs, buffer.actions)
        advantages = normalize_advantages(buffer.advantages)
        per_record = policy_loss_per_record(
            log_prob, log_prob.detach(), advantages, self.clip_range, entropy, self.ent_coef
        )
        return per_record.mean()


@dataclass(frozen=True)
class ActionTarget:
    """f_action = log π_θ(a*|s*): which records push the policy towards (or away from) a* in s*."""

    state: Observations  # s* as a batch of one, in the policy's observation layout
    action: torch.Tensor  # a* as a batch of one

    @classmethod
    def of(cls, state: npt.ArrayLike, action: npt.ArrayLike) -> ActionTarget:
        """From plain values (the config's lists): s* in the observation's shape, both as float32."""
        as_batch = lambda values: torch.tensor(values, dtype=torch.float32).unsqueeze(0)  # noqa: E731
        return cls(as_batch(state), as_batch(action))

    def loss(self, policy_fn: PolicyFn, buffer: Transitions) -> torch.Tensor:
        device = buffer.advantages.device
        log_prob, _ = policy_fn(observations_to(self.state, device), self.action.to(device))
        return -log_prob.sum()


def _action_target(cfg: TargetConfig, observation_shape: tuple[int, ...]) -> ActionTarget:
    # target.state is a flat YAML list; the policy takes s* in the env's observation shape (images too).
    assert cfg.state is not None and cfg.action is not None  # Trainer.check_config requires both
    return ActionTarget.of(np.reshape(list(cfg.state), observation_shape), list(cfg.action))


# target.name -> its builder (the control agent's targets; the language-model agent has its own)
TARGETS: dict[str, Callable[[TargetConfig, tuple[int, ...]], Target]] = {
    "return": lambda cfg, observation_shape: ReturnTarget(),
    "action": _action_target,
}


def make_target(cfg: TargetConfig, observation_shape: tuple[int, ...]) -> Target:
    return chosen(TARGETS, "target.name", cfg.name)(cfg, observation_shape)
