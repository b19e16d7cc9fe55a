"""The per-record PPO loss, shared by the update and by the influence computation.

`policy_loss_per_record` returns one loss per record (reduction="none"). The update averages it
over a minibatch; influence differentiates each entry at θ_k, where ratio = 1 and the clip is
inactive, so ∇ℓ_i = −Â_i ∇log π(a_i|s_i) (− ent_coef ∇H_i). One function, so the two can never drift.
"""

from __future__ import annotations

import torch


def normalize_advantages(advantages: torch.Tensor) -> torch.Tensor:
    """One minibatch's advantages (a 1-D tensor) to zero mean and unit std; a single record is left as is (SB3
    does the same), equal advantages become exact zeros. Any other shape is a ValueError: a [time, envs] buffer
    would be normalised whole or per row depending on the reader's guess, so the caller flattens it."""
    if advantages.dim() != 1:
        raise ValueError(
            f"normalize_advantages takes one minibatch's advantages, a 1-D tensor; got shape {tuple(advantages.shape)}"
        )
    return normalize_rows(advantages)


def normalize_rows(advantages: torch.Tensor) -> torch.Tensor:
    """normalize_advantages over the last axis, each row on its own and to the bits that row gets alone (the
    stacked update passes one row per seed).

    Equal advantages carry no preference between records: they become exact zeros. (Dividing
    their float rounding residue by std + 1e-8 would turn it into arbitrary values of order 1.)
    """
    if advantages.shape[-1] < 2:
        return advantages
    normalized = (advantages - advantages.mean(-1, keepdim=True)) / (advantages.std(-1, keepdim=True) + 1e-8)
    return torch.where((advantages == advantages[..., :1]).all(-1, keepdim=True), 0.0, normalized)


def policy_loss_per_record(
    log_prob: torch.Tensor,
    old_log_prob: torch.Tensor,
    advantages: torch.Tensor,
    clip_range: float,
    entropy: torch.Tensor,
    ent_coef: float,
) -> torch.Tensor:
    ratio = torch.exp(log_prob - old_log_prob)
    surrogate = torch.minimum(ratio * advantages, torch.clamp(ratio, 1 - clip_range, 1 + clip_range) * advantages)
    return -surrogate - ent_coef * entropy


def value_loss_per_record(values: torch.Tensor, returns: torch.Tensor) -> torch.Tensor:
    return (returns - values).pow(2)
