"""Per-record influence at the round's start: I_i = ⟨∇θ ℓ_i(θ_k), ∇θ L_f(θ_k)⟩, policy parameters only.

ℓ_i is the per-record PPO policy loss (losses.py) with advantages normalised over the buffer (or,
`influence.normalization=chunk`, within each minibatch-sized chunk of a seeded random partition, as
the authors' code did); L_f is the target's loss. Positive I_i: a gradient step on record i lowers L_f (raises f), the
record helps; negative: it hurts.

All N scores are directional derivatives of the per-record loss vector along v = ∇L_f, so one
forward-mode pass (`torch.func.jvp`) yields them all for any architecture. `reference_scores`
is the slow explicit per-record autograd loop that the tests check the fast path against.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import torch
from scipy import stats
from torch import nn
from torch.func import functional_call, jvp

from rlinfluence.choices import chosen
from rlinfluence.losses import normalize_advantages, policy_loss_per_record
from rlinfluence.policy import ActorCriticPolicy
from rlinfluence.records import RolloutBuffer
from rlinfluence.targets import Target

if TYPE_CHECKING:  # types only: the attribution API scores with this module without Hydra or gymnasium
    from rlinfluence.config.schema import InfluenceConfig, PPOConfig

Params = dict[str, torch.Tensor]


class _PolicyFn(nn.Module):
    """(obs, actions) -> (log π(a|s), entropy), callable with substituted parameters."""

    def __init__(self, model: ActorCriticPolicy):
        super().__init__()
        self.model = model

    def forward(self, obs: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.model.action_head.log_prob_entropy(self.model.policy_output(obs), actions)


def _policy_fn(policy: _PolicyFn, params: Params):
    return lambda obs, actions: functional_call(policy, params, (obs, actions))


def gradient(loss: Callable[[Params], torch.Tensor], params: Params) -> Params:
    """∇loss at `params`; a parameter the loss does not reach gets zeros."""
    params = {k: v.detach().clone().requires_grad_(True) for k, v in params.items()}
    grads = torch.autograd.grad(loss(params), list(params.values()), allow_unused=True)
    return {k: torch.zeros_like(v) if g is None else g for (k, v), g in zip(params.items(), grads)}


def directional_scores(
    per_record_loss: Callable[[Params, slice], torch.Tensor],
    params: Params,
    direction: Params,
    n_records: int,
    chunk_size: int,
) -> torch.Tensor:
    """⟨∇ℓ_i(params), direction⟩ for every record i, by forward-mode AD, `chunk_size` records per pass:
    the one scoring core of our trainer and of the public API (rlinfluence.attribution)."""
    scores = []
    for start in range(0, n_records, chunk_size):
        ids = slice(start, start + chunk_size)
        directional = jvp(lambda p, ids=ids: per_record_loss(p, ids), (params,), (direction,))[1]
        scores.append(directional.detach())
    return torch.cat(scores)


def _target_gradient(policy: _PolicyFn, params: Params, target: Target, buffer: RolloutBuffer) -> Params:
    """∇L_f at `params` (policy parameters only)."""
    return gradient(lambda p: target.loss(_policy_fn(policy, p), buffer), params)


def _per_record_loss(
    policy: _PolicyFn,
    params: Params,
    buffer: RolloutBuffer,
    ids: slice | torch.Tensor,
    old_log_prob: torch.Tensor,
    advantages: torch.Tensor,
    ppo: PPOConfig,
) -> torch.Tensor:
    """ℓ_i(params) for the records `ids`: the PPO policy loss with the given log π_old and normalised Â."""
    log_prob, entropy = functional_call(policy, params, (buffer.obs[ids], buffer.actions[ids]))
    return policy_loss_per_record(log_prob, old_log_prob, advantages, ppo.clip_range, entropy, ppo.ent_coef)


def _policy_params(model: ActorCriticPolicy) -> Params:
    named = dict(model.named_parameters())
    return {f"model.{n}": named[n].detach() for n in model.policy_parameter_names()}


class _Attribution:
    """What both backends share: the policy parameters at θ_k, the target gradient, ℓ(θ)."""

    def __init__(
        self,
        model: ActorCriticPolicy,
        buffer: RolloutBuffer,
        target: Target,
        ppo: PPOConfig,
        normalized_advantages: torch.Tensor | None = None,
    ):
        self.policy = _PolicyFn(model)
        buffer = buffer.to(model.device)
        self.params = _policy_params(model)
        self.buffer, self.ppo = buffer, ppo
        with torch.no_grad():
            self.old_log_prob = self.policy(buffer.obs, buffer.actions)[0]
        self.advantages = (
            normalize_advantages(buffer.advantages)
            if normalized_advantages is None
            else normalized_advantages.to(model.device)
        )
        self.target_gradient = _target_gradient(self.policy, self.params, target, buffer)

    def policy_fn(self, params: Params):
        return _policy_fn(self.policy, params)

    def per_record_loss(self, params: Params, ids: slice | torch.Tensor) -> torch.Tensor:
        return _per_record_loss(
            self.policy, params, self.buffer, ids, self.old_log_prob[ids], self.advantages[ids], self.ppo
        )


class StepInfluence:
    """The paper's general (multi-checkpoint) influence of a round's records (§3.1), summed over the
    update's minibatch steps j:  I_i = Σ_{j: i ∈ B_j} η ⟨∇ℓ_i(θ_j), ∇L_f(θ_j)⟩.

    ℓ_i is the record's loss as that minibatch trains on it (its own advantage normalisation, the
    rollout's log π_old, so the ratio and clip are live); L_f is the target over the round's buffer at
    θ_j; η the optimizer's learning rate (the SGD form; under Adam the step is preconditioned, see
    influence.preconditioner). The update calls `add_step` at θ_j, before each optimizer step: one
    target gradient and one forward-mode pass over the minibatch."""

    def __init__(self, model: ActorCriticPolicy, buffer: RolloutBuffer, target: Target, ppo: PPOConfig, lr: float):
        self.model, self.policy = model, _PolicyFn(model)
        self.buffer, self.target, self.ppo, self.lr = buffer.to(model.device), target, ppo, lr
        self.scores = torch.zeros(len(buffer), dtype=torch.float64, device=model.device)

    def add_step(self, ids: torch.Tensor, advantages: torch.Tensor) -> None:
        params = _policy_params(self.model)
        direction = _target_gradient(self.policy, params, self.target, self.buffer)
        old_log_prob, advantages = self.buffer.log_probs[ids], advantages.detach()
        directional = jvp(
            lambda p: _per_record_loss(self.policy, p, self.buffer, ids, old_log_prob, advantages, self.ppo),
            (params,),
            (direction,),
        )[1]
        self.scores.index_add_(0, ids, self.lr * directional.detach().double())


def target_value(model: ActorCriticPolicy, buffer: RolloutBuffer, target: Target) -> float:
    """f = −L_f at the model's current parameters (what a round's update should raise)."""
    with torch.no_grad():
        return -float(target.loss(_PolicyFn(model), buffer.to(model.device)))


def chunk_normalized_advantages(advantages: torch.Tensor, chunk: int, rng: np.random.Generator) -> torch.Tensor:
    """Â normalised within each `chunk`-record part of a random partition of the buffer: what one epoch
    of SB3 minibatches sees, and what the authors' influence used (their buffer was the epoch-1 shuffle)."""
    order = torch.from_numpy(rng.permutation(len(advantages))).to(advantages.device)
    normalized = torch.empty_like(advantages)
    for start in range(0, len(order), chunk):
        ids = order[start : start + chunk]
        normalized[ids] = normalize_advantages(advantages[ids])
    return normalized


def _preconditioned(gradient: Params, preconditioner: Params | None) -> Params:
    """P g for a diagonal P (None: P = I). Because P is diagonal, ⟨P ∇ℓ_i, ∇L_f⟩ = ⟨∇ℓ_i, P ∇L_f⟩:
    the fast path preconditions the one target direction instead of every record's gradient."""
    if preconditioner is None:
        return gradient
    return {k: g * preconditioner[k] for k, g in gradient.items()}


def adam_preconditioner(model: ActorCriticPolicy, optimizer: torch.optim.Optimizer) -> Params | None:
    """Adam's diagonal preconditioner P = 1 / (√v̂ + ε) at θ_k for the policy parameters, v̂ the
    bias-corrected second moment, exactly as Adam's next step divides by it.

    None before Adam's first step (no second moment yet: round 1): influence is then the plain inner
    product. Momentum scales every record's share of the step by the same factor, so it changes no
    ranking or sign and is left out."""
    named = dict(model.named_parameters())
    group = optimizer.param_groups[0]
    beta2, eps = group["betas"][1], group["eps"]
    preconditioner = {}
    for name in model.policy_parameter_names():
        state = optimizer.state.get(named[name])
        if not state:
            return None
        v_hat = state["exp_avg_sq"] / (1 - beta2 ** float(state["step"]))
        preconditioner[f"model.{name}"] = 1.0 / (v_hat.sqrt() + eps)
    return preconditioner


def round_attribution(
    model: ActorCriticPolicy,
    buffer: RolloutBuffer,
    ppo: PPOConfig,
    cfg: InfluenceConfig,
    partition_rng: np.random.Generator | None = None,
    optimizer: torch.optim.Optimizer | None = None,
) -> Callable[[Target], torch.Tensor]:
    """The round's scores on any target at θ_k, with the configured backend, advantage normalisation
    (`partition_rng` draws the chunks of `influence.normalization=chunk`, once: every target sees the
    same per-record losses) and preconditioner (`influence.preconditioner=adam` reads it from `optimizer`)."""
    normalize = chosen(NORMALIZATIONS, "influence.normalization", cfg.normalization)
    precondition = chosen(PRECONDITIONERS, "influence.preconditioner", cfg.preconditioner)
    scores = chosen(BACKENDS, "influence.backend", cfg.backend)
    normalized = normalize(buffer.advantages, ppo.batch_size, partition_rng)
    preconditioner = precondition(model, optimizer)

    def attribute(target: Target) -> torch.Tensor:
        return scores(model, buffer, target, ppo, cfg.chunk_size, normalized, preconditioner)

    return attribute


def compute_influence(
    model: ActorCriticPolicy,
    buffer: RolloutBuffer,
    target: Target,
    ppo: PPOConfig,
    cfg: InfluenceConfig,
    partition_rng: np.random.Generator | None = None,
    optimizer: torch.optim.Optimizer | None = None,
) -> torch.Tensor:
    """The round's scores on `target` (see `round_attribution`)."""
    return round_attribution(model, buffer, ppo, cfg, partition_rng, optimizer)(target)


def influence_scores(
    model: ActorCriticPolicy,
    buffer: RolloutBuffer,
    target: Target,
    ppo: PPOConfig,
    chunk_size: int = 4096,
    normalized_advantages: torch.Tensor | None = None,
    preconditioner: Params | None = None,
) -> torch.Tensor:
    """All N scores by forward-mode AD along the (preconditioned) target gradient, `chunk_size` records
    per pass. `normalized_advantages`: the per-record loss's Â (default: normalised over the whole
    buffer); `preconditioner`: a diagonal P per parameter, scores ⟨P ∇ℓ_i, ∇L_f⟩ (default: P = I)."""
    attribution = _Attribution(model, buffer, target, ppo, normalized_advantages)
    direction = _preconditioned(attribution.target_gradient, preconditioner)
    return directional_scores(attribution.per_record_loss, attribution.params, direction, len(buffer), chunk_size)


def reference_scores(
    model: ActorCriticPolicy,
    buffer: RolloutBuffer,
    target: Target,
    ppo: PPOConfig,
    normalized_advantages: torch.Tensor | None = None,
    preconditioner: Params | None = None,
) -> torch.Tensor:
    """The definition, literally: one backward pass per record, the preconditioner applied to that
    record's gradient, then a dot product with ∇L_f. Slow; for tests."""
    attribution = _Attribution(model, buffer, target, ppo, normalized_advantages)
    params = {k: v.clone().requires_grad_(True) for k, v in attribution.params.items()}
    scores = torch.empty(len(buffer), device=model.device)
    for i in range(len(buffer)):
        loss_i = attribution.per_record_loss(params, torch.tensor([i]))[0]
        grads = torch.autograd.grad(loss_i, list(params.values()), allow_unused=True)
        record_step = _preconditioned({k: g for k, g in zip(params, grads) if g is not None}, preconditioner)
        scores[i] = sum((g * attribution.target_gradient[k]).sum() for k, g in record_step.items())
    return scores


def _reference_backend(
    model: ActorCriticPolicy,
    buffer: RolloutBuffer,
    target: Target,
    ppo: PPOConfig,
    chunk_size: int,
    normalized_advantages: torch.Tensor | None,
    preconditioner: Params | None,
) -> torch.Tensor:
    return reference_scores(model, buffer, target, ppo, normalized_advantages, preconditioner)  # no chunks


# The closed choices of `influence.*`, each read by validation and by round_attribution.
# backend -> (model, buffer, target, ppo, chunk_size, Â, P) -> every record's score
BACKENDS = {"jvp": influence_scores, "reference": _reference_backend}
# normalization -> (advantages, chunk, rng) -> the per-record loss's Â (None: over the whole buffer)
NORMALIZATIONS: dict[str, Callable[..., torch.Tensor | None]] = {
    "buffer": lambda advantages, chunk, rng: None,
    "chunk": chunk_normalized_advantages,
}
# preconditioner -> (model, optimizer) -> the diagonal P (None: P = I)
PRECONDITIONERS: dict[str, Callable[..., Params | None]] = {
    "none": lambda model, optimizer: None,
    "adam": adam_preconditioner,
}
# checkpoints: the round-start scores alone, or also their every-step sums (StepInfluence, in the round loop)
EVERY_STEP = "every_step"
CHECKPOINTS = ("round_start", EVERY_STEP)


def rank_agreement(round_start: np.ndarray, every_step: np.ndarray, trained: np.ndarray) -> float:
    """Spearman correlation of the round-start scores with the every-step sums over the records the
    update trained on: how well the paper's snapshot ranks what the whole update did."""
    return float(stats.spearmanr(round_start[trained], every_step[trained]).statistic)
