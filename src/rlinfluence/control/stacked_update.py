"""One PPO update for N seeds at once, on the stacked actor-critic (control/stacked_networks.py).

Each seed keeps what is its own in SB3's update (update.py): its records, its selection, its minibatch shuffles
(`minibatch_ids` on its own `shuffle` generator, so the same ids in the same order alone or among others), its
gradient-norm clip and its step count. A step trains every seed that still has a minibatch; seeds whose
minibatches differ in size (a smaller last one, or fewer kept records) take their steps in separate groups of
one size. The loss is losses.py's per-record loss, averaged per seed; the seeds' losses are summed for one
backward, which gives each seed exactly its own gradient.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from rlinfluence.config.schema import PPOConfig
from rlinfluence.control.stacked_networks import StackedActorCritic
from rlinfluence.control.stacked_optim import SeedOptimizers, StackedOptimizer, stacked_optimizer
from rlinfluence.losses import normalize_rows, policy_loss_per_record, value_loss_per_record
from rlinfluence.records import RolloutBuffer
from rlinfluence.selection import Selection
from rlinfluence.update import StepHook, minibatch_ids

STATS = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction")


def clip_grad_norm_per_seed(parameters: Iterable[nn.Parameter], max_norm: float) -> None:
    """`nn.utils.clip_grad_norm_` for each seed on its own slice (dim 0) of the stacked gradients: one global
    norm over the stack would couple the seeds."""
    grads = [p.grad for p in parameters if p.grad is not None]
    # [seeds, parameters], each seed's norms a contiguous row, reduced in one order at any N: over dim 0 of
    # [parameters, seeds] one seed's 18 norms (the CNN's) summed in other bits than among others (12, the MLP's, not).
    norms = torch.stack([torch.linalg.vector_norm(g.flatten(1), dim=1) for g in grads], dim=1)
    coef = torch.clamp(max_norm / (torch.linalg.vector_norm(norms, dim=1) + 1e-6), max=1.0)
    for g in grads:
        g.mul_(coef.view(-1, *[1] * (g.dim() - 1)))


def _minibatches(selection: Selection, ppo: PPOConfig, rng: np.random.Generator) -> Iterator[torch.Tensor]:
    """One seed's minibatches over all epochs, each epoch's shuffle drawn as it starts, as it would alone."""
    drop_last = bool(ppo.drop_last_minibatch)
    return itertools.chain.from_iterable(
        minibatch_ids(selection, ppo.batch_size, rng, drop_last) for _ in range(ppo.n_epochs)
    )


RECORD_FIELDS = ("obs", "actions", "log_probs", "returns", "advantages")  # what a minibatch step reads


class StepSettings(NamedTuple):
    """The PPO settings a minibatch step reads, read once per update: a DictConfig lookup in the hot loop costs as
    much as a small layer."""

    normalize_advantage: bool
    clip_range: float
    ent_coef: float
    vf_coef: float
    max_grad_norm: float | None

    @classmethod
    def of(cls, ppo: PPOConfig) -> StepSettings:
        max_grad_norm = None if ppo.max_grad_norm is None else float(ppo.max_grad_norm)
        return cls(
            bool(ppo.normalize_advantage), float(ppo.clip_range), float(ppo.ent_coef), float(ppo.vf_coef), max_grad_norm
        )


def _minibatch_step(
    model: StackedActorCritic,
    optimizer: StackedOptimizer,
    records: dict[str, torch.Tensor],
    ids: torch.Tensor,
    group: list[int],
    ppo: StepSettings,
    on_steps: Sequence[StepHook | None] | None,
) -> torch.Tensor:
    """One gradient step of the seeds `group` (indices into the stack) on their minibatches `ids` ([seeds, size],
    each seed's own record ids; `records` the seeds' records, concatenated); their [seeds, 5] statistics. A seed's
    `on_steps` hook (every-step influence) is called at θ_j, before the step."""
    group_ids = torch.tensor(group, device=model.device)
    seeds = None if len(group) == model.n_seeds else group_ids
    n_records = len(records["obs"]) // model.n_seeds
    flat_ids = (group_ids.unsqueeze(1) * n_records + ids).flatten()  # one index_select per field
    obs, actions, old_log_prob, returns, advantages = (
        (field := records[name]).index_select(0, flat_ids).view(*ids.shape, *field.shape[1:]) for name in RECORD_FIELDS
    )
    if ppo.normalize_advantage:
        advantages = normalize_rows(advantages)  # each seed's row on its own
    clip_range = ppo.clip_range
    head_out, values = model(obs, seeds)
    log_prob, entropy = model.log_prob_entropy(head_out, actions, seeds)
    policy_loss = policy_loss_per_record(log_prob, old_log_prob, advantages, clip_range, entropy, ppo.ent_coef).mean(-1)
    value_loss = value_loss_per_record(values, returns).mean(-1)
    if on_steps is not None:  # every-step influence only: the loop stays out of the hot path otherwise
        for row, k in enumerate(group):
            if (on_step := on_steps[k]) is not None:
                on_step(ids[row], advantages[row])
    optimizer.zero_grad()
    (policy_loss + ppo.vf_coef * value_loss).sum().backward()
    if ppo.max_grad_norm is not None:
        clip_grad_norm_per_seed(model.parameters(), ppo.max_grad_norm)
    optimizer.step(group)
    with torch.no_grad():
        log_ratio = log_prob - old_log_prob
        return torch.stack(
            [
                policy_loss,
                value_loss,
                entropy.mean(-1),
                ((log_ratio.exp() - 1) - log_ratio).mean(-1),
                ((log_ratio.exp() - 1).abs() > clip_range).float().mean(-1),
            ],
            dim=1,
        )


def stacked_ppo_update(
    model: StackedActorCritic,
    optimizer: StackedOptimizer,
    buffers: list[RolloutBuffer],
    selections: list[Selection],
    ppo: PPOConfig,
    rngs: list[np.random.Generator],
    on_steps: Sequence[StepHook | None] | None = None,
) -> list[dict[str, float]]:
    """SB3's PPO update for each seed k on (buffers[k], selections[k], rngs[k]), with its hook
    on_steps[k] if any; each seed's statistics."""
    n = model.n_seeds
    if not len(buffers) == len(selections) == len(rngs) == n:
        raise ValueError(
            f"{len(buffers)} buffers, {len(selections)} selections and {len(rngs)} generators for {n} seeds"
        )
    sizes = [len(buffer) for buffer in buffers]
    if len(set(sizes)) > 1:  # seed k's records are found at k * size in the concatenation below
        raise ValueError(f"the seeds' buffers must hold as many records each; they hold {sizes}")
    # the seeds' records concatenated once for the round (seed k's from k * len(buffers[k])), each step's
    # minibatches gathered from them by index
    records = {
        name: torch.cat([getattr(buffer, name) for buffer in buffers]).to(model.device) for name in RECORD_FIELDS
    }
    schedules = [_minibatches(selection, ppo, rng) for selection, rng in zip(selections, rngs)]
    hooks = on_steps if on_steps and any(hook is not None for hook in on_steps) else None
    step_settings = StepSettings.of(ppo)
    sums = torch.zeros(n, len(STATS), device=model.device)
    steps = torch.zeros(n, dtype=torch.long, device=model.device)
    while batches := {k: ids for k, schedule in enumerate(schedules) if (ids := next(schedule, None)) is not None}:
        for size in sorted({len(ids) for ids in batches.values()}):
            group = [k for k, ids in batches.items() if len(ids) == size]
            ids = torch.stack([batches[k] for k in group]).to(model.device)
            stats = _minibatch_step(model, optimizer, records, ids, group, step_settings, hooks)
            sums[group] += stats
            steps[group] += 1
    means = sums / steps.clamp(min=1).unsqueeze(1)
    return [
        dict(zip(STATS, row)) | {"gradient_steps": int(count)} for row, count in zip(means.tolist(), steps.tolist())
    ]


def update_seeds(
    model: StackedActorCritic,
    seed_optimizers: SeedOptimizers,
    optimizer_name: str,
    lr: float,
    buffers: list[RolloutBuffer],
    selections: list[Selection],
    ppo: PPOConfig,
    rngs: list[np.random.Generator],
    on_steps: Sequence[StepHook | None] | None = None,
) -> list[dict[str, float]]:
    """`stacked_ppo_update` of the seeds whose own networks and optimizers are `seed_optimizers` (stacked as `model`),
    each carrying on from its optimizer's state at `lr`; each seed's network and optimizer are left as the update
    leaves its slice (they collect, evaluate and checkpoint). Each seed's statistics."""
    optimizer = stacked_optimizer(optimizer_name, model, seed_optimizers, lr)
    stats = stacked_ppo_update(model, optimizer, buffers, selections, ppo, rngs, on_steps)
    for i, (seed_model, _) in enumerate(seed_optimizers):
        seed_model.load_state_dict(model.seed_state_dict(i))
    optimizer.keep(seed_optimizers)  # Adam's state carries on in each seed's optimizer (and checkpoint)
    return stats
