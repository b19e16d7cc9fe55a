"""LM-PPO (the semantics of TRL 0.5's PPOTrainer, which the paper ran; written here on plain torch).

Per round: a per-token KL penalty −β·(log π − log π_ref) with the score added at the last response
token; GAE over the response tokens (γ, λ; the value after the last token is 0); advantages whitened
over all of the round's response tokens (every arm alike, and the influence sees the same ones); then
`n_epochs` passes over the kept records in minibatches with the clipped policy and value losses; β
follows the adaptive KL controller. lm/grpo.py's update shares the epochs (`minibatch_epochs`), the
clipped surrogate and the ratio statistics.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from rlinfluence.lm.rollout import Sequences
from rlinfluence.selection import Selection
from rlinfluence.update import minibatch_ids


@dataclass
class AdaptiveKLController:
    """β ← β·(1 + clip(KL/target − 1, ±0.2)·n/horizon) after each round of n records (Ziegler et al. 2019)."""

    value: float
    target: float
    horizon: int

    def update(self, current_kl: float, n_records: int) -> None:
        error = float(np.clip(current_kl / self.target - 1, -0.2, 0.2))
        self.value *= 1 + error * n_records / self.horizon


def masked_mean(values: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    if dim is None:
        return (values * mask).sum() / mask.sum()
    return (values * mask).sum(dim) / mask.sum(dim).clamp(min=1)


def masked_whiten(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Zero mean, unit variance over the masked entries (unbiased variance, as TRL)."""
    mean = masked_mean(values, mask)
    variance = ((values - mean) ** 2 * mask).sum() / (mask.sum() - 1).clamp(min=1)
    return (values - mean) * torch.rsqrt(variance + 1e-8) * mask


def sequence_kl(logprobs: torch.Tensor, ref_logprobs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Σ_t (log π − log π_ref) over each response: the KL estimate the controller steers."""
    return ((logprobs - ref_logprobs) * mask).sum(1)


def penalized_rewards(
    scores: torch.Tensor, logprobs: torch.Tensor, ref_logprobs: torch.Tensor, mask: torch.Tensor, kl_coef: float
) -> torch.Tensor:
    """Per-token rewards: −β·(log π − log π_ref) on every response token, plus the score on the last."""
    rewards = -kl_coef * (logprobs - ref_logprobs) * mask
    last = mask.shape[1] - 1 - mask.flip(1).argmax(1)  # the last response position of each row
    rewards[torch.arange(len(scores)), last] += scores
    return rewards


def token_gae(
    rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float, lam: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """GAE along each response; returns (advantages, returns = advantages + values), zero off the mask."""
    advantages = torch.zeros_like(rewards)
    running = torch.zeros(rewards.shape[0], device=rewards.device)
    next_value = torch.zeros_like(running)
    for t in reversed(range(rewards.shape[1])):
        on = mask[:, t]
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        running = torch.where(on > 0, delta + gamma * lam * running, running)
        next_value = torch.where(on > 0, values[:, t], next_value)
        advantages[:, t] = running * on
    return advantages, (advantages + values) * mask


def clipped_surrogate(ratio: torch.Tensor, advantages: torch.Tensor, clip_range: float) -> torch.Tensor:
    """min(ρÂ, clip(ρ, 1 ± ε)Â) per token: the objective PPO and GRPO both maximise."""
    return torch.minimum(ratio * advantages, torch.clamp(ratio, 1 - clip_range, 1 + clip_range) * advantages)


def record_losses(
    logprobs: torch.Tensor, values: torch.Tensor, batch: Sequences, clip_range: float, value_clip: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(policy loss, value loss, mean ratio) of each record: masked means over its response tokens of the
    clipped surrogate −min(ρÂ, clip(ρ)Â) and of ½·max((V − R)², (clip(V) − R)²). The update and the
    influence computation both call this, so they cannot drift apart (at θ_k, ρ = 1 and nothing clips)."""
    mask = batch.mask
    assert (
        batch.logprobs is not None
        and batch.values is not None
        and batch.advantages is not None
        and batch.returns is not None
    ), "annotate the batch first"
    ratio = torch.exp(logprobs - batch.logprobs)
    surrogate = clipped_surrogate(ratio, batch.advantages, clip_range)
    clipped_values = batch.values + torch.clamp(values - batch.values, -value_clip, value_clip)
    value_error = torch.maximum((values - batch.returns) ** 2, (clipped_values - batch.returns) ** 2)
    return (
        masked_mean(-surrogate, mask, 1),
        0.5 * masked_mean(value_error, mask, 1),
        masked_mean(ratio.detach(), mask, 1),
    )


# A minibatch's loss and its logged stats, or None to skip the minibatch (lm/grpo.py's update uses it too).
MinibatchStep = Callable[[Sequences], tuple[torch.Tensor, dict[str, float]] | None]


def ratio_stats(logprobs: torch.Tensor, part: Sequences, clip_range: float) -> dict[str, float]:
    """approx_kl and clip_fraction of the ratios π_θ / π_θk over the minibatch's response tokens."""
    assert part.logprobs is not None, "annotate the batch first"
    with torch.no_grad():
        log_ratio = logprobs - part.logprobs
        return {
            "approx_kl": float(masked_mean((torch.exp(log_ratio) - 1) - log_ratio, part.mask)),
            "clip_fraction": float(masked_mean((torch.abs(torch.exp(log_ratio) - 1) > clip_range).float(), part.mask)),
        }


def minibatch_epochs(
    policy,
    optimizer: torch.optim.Optimizer,
    batch: Sequences,
    selection: Selection,
    ppo_cfg,
    rng: np.random.Generator,
    stats: tuple[str, ...],
    step: MinibatchStep,
) -> dict[str, float]:
    """`n_epochs` passes over the kept records, each reshuffled into minibatches of `ppo.batch_size`; one
    optimizer step on each minibatch's loss (`step`); the mean of the `stats` over the steps taken."""
    sums = dict.fromkeys(stats, 0.0)
    steps = 0
    for _ in range(ppo_cfg.n_epochs):
        for ids in minibatch_ids(selection, ppo_cfg.batch_size, rng):
            taken = step(batch.rows(ids.to(batch.input_ids.device)))
            if taken is None:
                continue
            loss, values = taken
            optimizer.zero_grad()
            loss.backward()
            if ppo_cfg.max_grad_norm is not None:
                torch.nn.utils.clip_grad_norm_(
                    [p for p in policy.parameters() if p.requires_grad], ppo_cfg.max_grad_norm
                )
            optimizer.step()
            for key in stats:
                sums[key] += values[key]
            steps += 1
    return {key: total / max(steps, 1) for key, total in sums.items()} | {"gradient_steps": steps}


def ppo_update(
    policy,
    optimizer: torch.optim.Optimizer,
    batch: Sequences,
    selection: Selection,
    ppo_cfg,
    lm_cfg,
    rng: np.random.Generator,
) -> dict[str, float]:
    """LM-PPO's epochs (`minibatch_epochs`) with the clipped policy and value losses; a minibatch whose mean
    ratio exceeds `ratio_threshold` is skipped (TRL)."""

    def step(part: Sequences) -> tuple[torch.Tensor, dict[str, float]] | None:
        logprobs, values = policy(part.input_ids, part.attention_mask)
        policy_loss, value_loss, ratio = record_losses(logprobs, values, part, ppo_cfg.clip_range, lm_cfg.value_clip)
        if float(ratio.mean()) > lm_cfg.ratio_threshold:
            return None
        logged = {"policy_loss": float(policy_loss.detach().mean()), "value_loss": float(value_loss.detach().mean())}
        return (policy_loss + ppo_cfg.vf_coef * value_loss).mean(), logged | ratio_stats(
            logprobs, part, ppo_cfg.clip_range
        )

    return minibatch_epochs(
        policy,
        optimizer,
        batch,
        selection,
        ppo_cfg,
        rng,
        ("policy_loss", "value_loss", "approx_kl", "clip_fraction"),
        step,
    )
