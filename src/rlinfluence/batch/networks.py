"""N actor-critics of one MLP config (N seeds) as one module: each layer's N weights stacked as [N, in, out]
and applied with one `torch.baddbmm`, so a forward or backward costs one call for all seeds.

Seed k's slice starts bit-for-bit as today's engine initialises seed k (`from_seeds` builds each seed's
`ActorCritic` and stacks it). The slices never mix, and a slice's numbers do not depend on which or how many
seeds sit beside it: baddbmm over [N, B, in] × [N, in, out] gives each slice the same bits for any N (tested
for the presets' shapes, N = 1, 3, 16, at one torch thread: a run's `torch_threads` default; at two, Acrobot's
slices came out differently at N = 3 than at N = 1), except for a 1-wide output at N = 1, which torch sends to another
kernel; the value head is therefore a product and a sum over its inputs. These kernels round differently from
today's `nn.Linear` (addmm), so a stacked seed is today's run up to float rounding, not bit-for-bit.
"""

from __future__ import annotations

from typing import cast

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlinfluence.config.schema import NetworkConfig
from rlinfluence.control.networks import ActorCritic, CategoricalHead
from rlinfluence.seeding import spawn_streams, torch_generator


class StackedLinear(nn.Module):
    """N `nn.Linear`s of one shape: weight [N, in, out], bias [N, 1, out]."""

    def __init__(self, linears: list[nn.Linear]):
        super().__init__()
        self.weight = nn.Parameter(torch.stack([linear.weight.detach().t() for linear in linears]).contiguous())
        self.bias = nn.Parameter(torch.stack([linear.bias.detach() for linear in linears]).unsqueeze(1))

    def forward(self, x: torch.Tensor, seeds: torch.Tensor | None) -> torch.Tensor:
        """x [m, B, in] -> [m, B, out], for all seeds (None) or the m `seeds` (indices into the stack)."""
        weight, bias = (self.weight, self.bias) if seeds is None else (self.weight[seeds], self.bias[seeds])
        if weight.shape[-1] == 1:  # baddbmm's kernel for a 1-wide output at N = 1 rounds unlike at N > 1
            return (x * weight.transpose(1, 2)).sum(-1, keepdim=True) + bias
        return torch.baddbmm(bias, x, weight)

    def seed_state(self, k: int, name: str) -> dict[str, torch.Tensor]:
        """Seed k's weight and bias as today's `nn.Linear` called `name` holds them."""
        return {f"{name}.weight": self.weight[k].t().clone(), f"{name}.bias": self.bias[k, 0].clone()}


def _linears(body: nn.Sequential, name: str) -> list[tuple[str, nn.Linear]]:
    return [(f"{name}.{i}", layer) for i, layer in enumerate(body) if isinstance(layer, nn.Linear)]


class StackedActorCritic(nn.Module):
    """`ActorCritic`s of one config with flat (MLP) observations and discrete actions, stacked by seed."""

    def __init__(self, models: list[ActorCritic]):
        super().__init__()
        first = models[0]
        if not isinstance(first.features, nn.Flatten) or not isinstance(first.action_head, CategoricalHead):
            raise ValueError(
                "the stacked engine runs env.network.kind=mlp with discrete actions only (FrozenLake, Acrobot)"
            )
        self.n_seeds = len(models)
        # Today's module names of each stacked layer, in forward order: what `seed_state_dict` writes.
        self.pi_names = [name for name, _ in _linears(first.pi_body, "pi_body")]
        self.vf_names = [name for name, _ in _linears(first.vf_body, "vf_body")]
        self.pi_body = self._stack(models, lambda model: _linears(model.pi_body, "pi_body"))
        self.vf_body = self._stack(models, lambda model: _linears(model.vf_body, "vf_body"))
        self.action_head = StackedLinear([model.action_head.linear for model in models])
        self.value_head = StackedLinear([model.value_head for model in models])
        self.activation = type(first.pi_body[1])()

    @staticmethod
    def _stack(models: list[ActorCritic], layers) -> nn.ModuleList:
        per_model = [[linear for _, linear in layers(model)] for model in models]
        return nn.ModuleList(StackedLinear(list(same_layer)) for same_layer in zip(*per_model))

    @classmethod
    def from_seeds(
        cls, observation_space: gym.Space, action_space: gym.Space, net: NetworkConfig, seeds: list[int]
    ) -> StackedActorCritic:
        """Each seed's network as today's engine initialises it (its `network` stream), stacked in `seeds`' order."""
        return cls(
            [
                ActorCritic(observation_space, action_space, net, torch_generator(spawn_streams(seed)["network"]))
                for seed in seeds
            ]
        )

    def _body(self, layers: nn.ModuleList, x: torch.Tensor, seeds: torch.Tensor | None) -> torch.Tensor:
        for layer in layers:
            x = self.activation(layer(x, seeds))
        return x

    def forward(self, obs: torch.Tensor, seeds: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """obs [m, B, *obs_shape] -> (logits [m, B, actions], values [m, B]), m = all seeds or len(seeds)."""
        n = self.n_seeds if seeds is None else len(seeds)
        if obs.shape[0] != n:
            raise ValueError(f"observations for {obs.shape[0]} seeds, the stack runs {n}")
        values = self.value_head(self._body(self.vf_body, obs.flatten(2), seeds), seeds).squeeze(-1)
        return self.policy_logits(obs, seeds), values

    def policy_logits(self, obs: torch.Tensor, seeds: torch.Tensor | None = None) -> torch.Tensor:
        """The policy's half of `forward` (influence attributes the policy alone)."""
        return self.action_head(self._body(self.pi_body, obs.flatten(2), seeds), seeds)

    @staticmethod
    def log_prob_entropy(logits: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Today's categorical head on [m, B] records (one row of logits per record either way)."""
        log_prob, entropy = CategoricalHead.log_prob_entropy(logits.flatten(0, 1), actions.flatten())
        return log_prob.view(actions.shape[:2]), entropy.view(actions.shape[:2])

    def seed_state_dict(self, k: int) -> dict[str, torch.Tensor]:
        """Seed k's parameters as today's `ActorCritic.state_dict()` names them (its checkpoint, its replay)."""
        named = [
            *zip(self.pi_names, self.pi_body),
            *zip(self.vf_names, self.vf_body),
            ("action_head.linear", self.action_head),
            ("value_head", self.value_head),
        ]
        return {
            key: value for name, layer in named for key, value in cast(StackedLinear, layer).seed_state(k, name).items()
        }


class SeedCritic:
    """Seed k of a stack as a rollout computes its records with it (control/collect.py's Critic): numpy in,
    numpy out, through the stack's kernels (a slice's bits do not depend on the stack's other seeds)."""

    def __init__(self, model: StackedActorCritic, k: int):
        self.model, self.seeds = model, torch.tensor([k])

    @torch.no_grad()
    def values_and_log_probs(self, obs: np.ndarray, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        logits, values = self.model(torch.as_tensor(obs).unsqueeze(0), self.seeds)
        log_prob, _ = self.model.log_prob_entropy(logits, torch.as_tensor(actions).unsqueeze(0))
        return values[0].numpy(), log_prob[0].numpy()

    @torch.no_grad()
    def values(self, obs: np.ndarray) -> np.ndarray:
        return self.model(torch.as_tensor(obs).unsqueeze(0), self.seeds)[1][0].numpy()
