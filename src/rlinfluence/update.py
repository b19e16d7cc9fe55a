"""What the PPO update (control/stacked_update.py, every seed of a stack at once) reads: the optimizer, the scheduled
settings and each seed's minibatches of its selected records (SB3 2.x PPO semantics).

Each epoch reshuffles the kept records and cuts them into minibatches of `batch_size` (the last
one may be smaller, as in SB3, or skipped with `ppo.drop_last_minibatch`, as in the authors' filtered
training), so fewer kept records mean fewer gradient steps: that saving is
part of IIF's speed-up. Reweighting methods instead draw N ids with replacement by weight. An
in-place selection (the counterfactual analysis) keeps the standard update's minibatches and only
takes the dropped records out of them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch

from rlinfluence.choices import chosen
from rlinfluence.config.schema import OptimizerConfig
from rlinfluence.selection import Selection


def _sgd(cfg: OptimizerConfig, params) -> torch.optim.Optimizer:
    """Plain SGD: no momentum, no weight decay (the paper's setting)."""
    return torch.optim.SGD(params, lr=cfg.lr, foreach=True)


def _adam(cfg: OptimizerConfig, params) -> torch.optim.Optimizer:
    """Adam with optimizer.eps (SB3's 1e-5); its moments carry over across rounds."""
    return torch.optim.Adam(params, lr=cfg.lr, eps=cfg.eps, foreach=True)


# optimizer.name -> its builder (validation and make_optimizer read this one table)
OPTIMIZERS: dict[str, Callable[[OptimizerConfig, Any], torch.optim.Optimizer]] = {"sgd": _sgd, "adam": _adam}


def make_optimizer(cfg: OptimizerConfig, params) -> torch.optim.Optimizer:
    return chosen(OPTIMIZERS, "optimizer.name", cfg.name)(cfg, params)


# ppo.lr_schedule, ppo.clip_range_schedule -> a setting's value in round k's update of `rounds`
SCHEDULES: dict[str, Callable[[float, int, int], float]] = {
    "constant": lambda value, k, rounds: value,
    # rl-zoo's `lin_<value>`: SB3 scales by progress_remaining = 1 − steps done / total steps, taken
    # after the round's rollout is collected
    "linear": lambda value, k, rounds: (1 - k / rounds) * value,
}


def scheduled(value: float, schedule: str, k: int, rounds: int) -> float:
    """A `ppo.*_schedule`d setting's value in round k's update (k = 1..rounds; `value` its config value).

    linear: round 1 value·(1 − 1/rounds), the last round 0 (an update that no longer moves the
    parameters, as in SB3). A function of k alone, so a resumed or replayed round gets the same value."""
    return SCHEDULES[schedule](value, k, rounds)


def minibatch_ids(
    selection: Selection, batch_size: int, rng: np.random.Generator, drop_last: bool = False
) -> Iterator[torch.Tensor]:
    if selection.weights is not None:
        order = rng.choice(len(selection.keep), size=len(selection.keep), p=selection.weights)
    else:
        # In place, every record is shuffled (the same permutation as keeping all), then the dropped leave.
        order = rng.permutation(np.flatnonzero(np.ones_like(selection.keep) if selection.in_place else selection.keep))
    ids = torch.from_numpy(order)
    end = len(ids) - len(ids) % batch_size if drop_last else len(ids)
    for start in range(0, end, batch_size):
        batch = ids[start : start + batch_size]
        if selection.in_place:
            batch = batch[torch.from_numpy(selection.keep[batch.numpy()])]
        if len(batch):
            yield batch


# Called at θ_j before each optimizer step with the minibatch's record ids and normalised advantages
# (influence.StepInfluence.add_step).
StepHook = Callable[[torch.Tensor, torch.Tensor], None]
