"""GRPO (Shao et al. 2024, DeepSeekMath) as TRL's GRPOTrainer computes it, on the LM path's LoRA policy
(env.lm.algorithm=grpo; settings env.lm.grpo.*).

A round's batch holds `group_size` sampled responses to each of its prompts, in consecutive rows (a
group). A response's advantage is its reward minus its group's mean reward, divided by the group's std
(unbiased, + 1e-4) unless `scale_rewards=false` (Dr. GRPO), and the same on every one of its tokens. Its
per-token loss is the clipped surrogate with that advantage plus β times TRL's k3 estimate of KL(π ‖ π_ref),
exp(ref − logp) − (ref − logp) − 1; a record's loss aggregates it over its response tokens (`LOSS_TYPES`),
and a minibatch's loss is the mean of its records' losses, which is TRL's loss for either type. No value
head, no GAE, β fixed (no KL controller).

IIF's records are the responses: the influence differentiates `record_losses` at θ_k with the advantages as
collected. `drop_baseline` says what the update does with the groups a selection thinned: `collected` keeps
each response's advantage (a record is fixed, like a PPO record's GAE); `recompute` takes each group's
mean and std over its kept responses again (a group left with one response gets advantage 0).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np
import torch

from rlinfluence.lm.policy import Policy
from rlinfluence.lm.ppo import clipped_surrogate, masked_mean, minibatch_epochs, ratio_stats
from rlinfluence.lm.rollout import Sequences
from rlinfluence.selection import Selection

STD_EPS = 1e-4  # TRL's, added to a group's reward std
COLLECTED, RECOMPUTE = "collected", "recompute"
DROP_BASELINES = (COLLECTED, RECOMPUTE)

# env.lm.grpo.loss_type -> a record's loss from its per-token losses, response mask and the longest response
# a run can sample: grpo, the mean over its tokens; dr_grpo, the sum over a constant (Dr. GRPO: no length bias).
LOSS_TYPES: dict[str, Callable[[torch.Tensor, torch.Tensor, int], torch.Tensor]] = {
    "grpo": lambda per_token, mask, max_tokens: masked_mean(per_token, mask, 1),
    "dr_grpo": lambda per_token, mask, max_tokens: (per_token * mask).sum(1) / max_tokens,
}


def group_advantages(
    scores: torch.Tensor, group_size: int, scale: bool, members: torch.Tensor | None = None
) -> torch.Tensor:
    """Each response's reward minus its group's mean, over the group's std + STD_EPS with `scale`. The mean
    and std are taken over the group's `members` (bool per response; default all of them); a response that
    is not a member, or is its group's only member, gets 0."""
    rewards = scores.view(-1, group_size)
    on = (torch.ones_like(scores) if members is None else members.to(scores)).view(-1, group_size)
    count = on.sum(1, keepdim=True)
    deviation = (rewards - (rewards * on).sum(1, keepdim=True) / count.clamp(min=1)) * on
    if scale:
        std = torch.sqrt((deviation**2).sum(1, keepdim=True) / (count - 1).clamp(min=1))
        deviation = deviation / (std + STD_EPS)
    return torch.where(count > 1, deviation, torch.zeros_like(deviation)).flatten()


def on_tokens(advantages: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """One advantage per response, on every one of its response tokens (what Sequences.advantages holds)."""
    return advantages[:, None] * mask


def k3_kl(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """TRL's per-token estimate of KL(π ‖ π_ref) on tokens sampled from π: exp(r) − r − 1, r = ref − logp (≥ 0)."""
    log_ratio = ref_logprobs - logprobs
    return torch.exp(log_ratio) - log_ratio - 1


def record_losses(
    logprobs: torch.Tensor, batch: Sequences, clip_range: float, beta: float, loss_type: str, max_tokens: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """(loss, mean ratio) of each record: −min(ρÂ, clip(ρ)Â) + β·k3 per token, aggregated by `loss_type`. The
    update and the influence computation both call this (at θ_k, ρ = 1 and nothing clips)."""
    assert batch.logprobs is not None and batch.ref_logprobs is not None and batch.advantages is not None, (
        "annotate the batch first"
    )
    ratio = torch.exp(logprobs - batch.logprobs)
    per_token = -clipped_surrogate(ratio, batch.advantages, clip_range) + beta * k3_kl(logprobs, batch.ref_logprobs)
    return LOSS_TYPES[loss_type](per_token, batch.mask, max_tokens), masked_mean(ratio.detach(), batch.mask, 1)


def record_loss_fn(clip_range: float, grpo_cfg, max_tokens: int) -> Callable[[Policy, Sequences], torch.Tensor]:
    """ℓ_i for every record of a batch (the update's per-record loss), as lm/influence.py's scores take it."""

    def losses(policy: Policy, batch: Sequences) -> torch.Tensor:
        logprobs, _ = policy(batch.input_ids, batch.attention_mask)
        return record_losses(logprobs, batch, clip_range, grpo_cfg.beta, grpo_cfg.loss_type, max_tokens)[0]

    return losses


def grpo_update(
    policy: Policy,
    optimizer: torch.optim.Optimizer,
    batch: Sequences,
    selection: Selection,
    ppo_cfg,
    grpo_cfg,
    max_tokens: int,
    rng: np.random.Generator,
) -> dict[str, float]:
    """`ppo.n_epochs` passes over the kept records in minibatches of `ppo.batch_size` (lm/ppo.py's
    `minibatch_epochs`), on the GRPO loss; with drop_baseline=recompute, on the kept groups' advantages."""
    if grpo_cfg.drop_baseline == RECOMPUTE:
        kept = torch.from_numpy(selection.keep).to(batch.scores.device)
        advantages = group_advantages(batch.scores, grpo_cfg.group_size, grpo_cfg.scale_rewards, kept)
        batch = replace(batch, advantages=on_tokens(advantages, batch.mask))

    def step(part: Sequences) -> tuple[torch.Tensor, dict[str, float]]:
        logprobs, _ = policy(part.input_ids, part.attention_mask)
        loss, _ = record_losses(logprobs, part, ppo_cfg.clip_range, grpo_cfg.beta, grpo_cfg.loss_type, max_tokens)
        logged = {"policy_loss": float(loss.detach().mean())} | ratio_stats(logprobs, part, ppo_cfg.clip_range)
        return loss.mean(), logged

    return minibatch_epochs(
        policy, optimizer, batch, selection, ppo_cfg, rng, ("policy_loss", "approx_kl", "clip_fraction"), step
    )
