"""The optimizer of a stacked update (control/stacked_update.py): each seed's own optimizer (update.make_optimizer's,
in its Trainer) run on its slice of the stacked parameters.

The seeds step different numbers of times in a round (their kept sets, hence minibatches, differ), so a step
names the seeds it trains, and a seed that sits it out neither moves nor advances its state. Plain SGD keeps
no state: a seed left out has a zero gradient, which moves it by nothing. Adam keeps each seed's step count
and moments; they live in the seed's own `torch.optim.Adam` between rounds (so its checkpoint holds them as
torch's Adam writes them) and are stacked for the round's update.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from rlinfluence.choices import chosen
from rlinfluence.control.stacked_networks import StackedActorCritic

MOMENTS = ("exp_avg", "exp_avg_sq")  # torch.optim.Adam's state names
SeedOptimizers = Sequence[tuple[nn.Module, torch.optim.Optimizer]]  # each seed's network and its optimizer


class StackedSGD:
    """torch's SGD (foreach, no momentum) on the stack: a seed's slice steps as that seed alone would."""

    def __init__(self, model: StackedActorCritic, seed_optimizers: SeedOptimizers, lr: float):
        self.sgd = torch.optim.SGD(model.parameters(), lr=lr, foreach=True)

    def zero_grad(self) -> None:
        self.sgd.zero_grad(set_to_none=True)

    def step(self, seeds: list[int]) -> None:
        self.sgd.step()  # the seeds not in `seeds` have zero gradients

    def keep(self, seed_optimizers: SeedOptimizers) -> None:
        """Nothing to keep: SGD has no state."""


class StackedAdam:
    """Adam (torch.optim.Adam's update: bias-corrected moments, eps added to the corrected root) with each seed's
    own step count and moments. Only single elementwise kernels, so a seed's bits do not depend on its place
    in the stack."""

    def __init__(self, model: StackedActorCritic, seed_optimizers: SeedOptimizers, lr: float):
        group = seed_optimizers[0][1].param_groups[0]
        if group["weight_decay"] or group["amsgrad"] or group["maximize"]:
            raise ValueError("the stacked update runs Adam without weight decay, amsgrad or maximize")
        self.model, self.lr, self.eps = model, lr, float(group["eps"])
        self.betas = tuple(float(beta) for beta in group["betas"])
        self.parameters = model.seed_parameters()
        states = [_seed_state(seed_model, optimizer) for seed_model, optimizer in seed_optimizers]
        self.steps = [step for step, _ in states]
        self.moments = {
            moment: [
                layer.stacked(attr, [state[key][moment] for _, state in states]) for key, layer, attr in self.parameters
            ]
            for moment in MOMENTS
        }

    def zero_grad(self) -> None:
        self.model.zero_grad(set_to_none=True)

    @torch.no_grad()
    def step(self, seeds: list[int]) -> None:
        """One Adam step of the seeds `seeds` (indices into the stack) on their gradients."""
        beta1, beta2 = self.betas
        for k in seeds:
            self.steps[k] += 1
        counts = [self.steps[k] for k in seeds]
        device = self.model.device
        step_size = torch.tensor([-self.lr / (1 - beta1**count) for count in counts], device=device)
        root_correction = torch.tensor([(1 - beta2**count) ** 0.5 for count in counts], device=device)
        every = len(seeds) == self.model.n_seeds  # then in place, without gathering the slices
        index = torch.tensor(seeds, device=device)
        for (_, layer, attr), exp_avg, exp_avg_sq in zip(self.parameters, *self.moments.values()):
            param: torch.Tensor = getattr(layer, attr)
            assert param.grad is not None  # every parameter is in every seed's loss
            grad, mean, square = (
                (param.grad, exp_avg, exp_avg_sq) if every else (param.grad[index], exp_avg[index], exp_avg_sq[index])
            )
            per_seed = (-1,) + (1,) * (param.dim() - 1)
            mean.add_((grad - mean).mul_(1 - beta1))
            square.mul_(beta2).add_(grad.mul(1 - beta2).mul_(grad))
            denominator = square.sqrt().div_(root_correction.view(per_seed)).add_(self.eps)
            update = mean.mul(step_size.view(per_seed)).div_(denominator)
            if every:
                param.add_(update)
            else:
                param[index] += update
                exp_avg[index], exp_avg_sq[index] = mean, square

    def keep(self, seed_optimizers: SeedOptimizers) -> None:
        """Each seed's step count and moments into its own optimizer (after its network has the seed's parameters),
        its lr the round's, as torch's Adam would leave them."""
        for k, (seed_model, optimizer) in enumerate(seed_optimizers):
            optimizer.param_groups[0]["lr"] = self.lr
            if not self.steps[k]:
                continue
            parameters = dict(seed_model.named_parameters())
            for j, (key, layer, attr) in enumerate(self.parameters):
                optimizer.state[parameters[key]] = {
                    "step": torch.tensor(float(self.steps[k])),
                    **{moment: layer.seed_tensor(attr, stacked[j], k) for moment, stacked in self.moments.items()},
                }


StackedOptimizer = StackedSGD | StackedAdam
# optimizer.name -> the stack's (update.OPTIMIZERS' names)
STACKED_OPTIMIZERS: dict[str, type[StackedOptimizer]] = {"sgd": StackedSGD, "adam": StackedAdam}


def _seed_state(model: nn.Module, optimizer: torch.optim.Optimizer) -> tuple[int, dict[str, dict[str, torch.Tensor]]]:
    """A seed optimizer's step count and moments by its network's parameter names (zeros before its first step)."""
    state = {
        key: optimizer.state.get(p) or {"step": 0, **dict.fromkeys(MOMENTS, torch.zeros_like(p))}
        for key, p in model.named_parameters()
    }
    return int(next(iter(state.values()))["step"]), state


def stacked_optimizer(
    name: str, model: StackedActorCritic, seed_optimizers: SeedOptimizers, lr: float
) -> StackedOptimizer:
    """The stack's optimizer for optimizer.name `name` at learning rate `lr`, carrying on from the seeds' own."""
    return chosen(STACKED_OPTIMIZERS, "optimizer.name", name)(model, seed_optimizers, lr)
