"""N actor-critics of one config (N seeds) as one module: each linear layer's N weights stacked as [N, in, out]
and applied with one `torch.baddbmm`, so a forward or backward costs one call for all seeds; a convolution
runs each seed's own `conv2d` (StackedConv2d).

Seed k's slice starts bit-for-bit as seed k's own `ActorCritic` (control/networks.py) is initialised (`from_seeds`
builds each seed's `ActorCritic` and stacks it). The slices never mix, and a slice's numbers do not depend on which
or how many seeds sit beside it: baddbmm over [N, B, in] × [N, in, out] gives each slice the same bits for any N
(tested for the presets' shapes, N = 1, 3, 16, at one torch thread: a run's `torch_threads` default; at two,
Acrobot's slices came out differently at N = 3 than at N = 1), except for a 1-wide output at N = 1, which torch sends
to another kernel; the value head is therefore a product and a sum over its inputs. MiniGrid's CNN is tested the same
way (tests/control/). These round differently from an `nn.Linear` (addmm): the one-run round that engine=default had
until commit cfbcb6b (replay.ONE_RUN_ROUND_LAST) is another numerics class (docs/reproduction/stacked.md, "One
engine").
"""

from __future__ import annotations

from typing import cast

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlinfluence.config.schema import NetworkConfig
from rlinfluence.control.networks import ActorCritic, CategoricalHead, GaussianHead, ImageScale
from rlinfluence.seeding import spawn_streams, torch_generator


class _SeedStacked(nn.Module):
    """A module whose parameters are stacked by seed on dim 0; a vector parameter (a bias, a log std) as
    [N, 1, size], which broadcasts over a batch [N, B, size]. `stacked` and `seed_tensor` convert between
    a seed's own layout and the stack's for anything shaped as a parameter (the parameters, Adam's moments)."""

    def stacked(self, name: str, tensors: list[torch.Tensor]) -> torch.Tensor:
        """The seeds' `name` tensors (a seed's own layout, in stack order) in the stack's layout."""
        return torch.stack(tensors).unsqueeze(1)

    def seed_tensor(self, name: str, stacked: torch.Tensor, k: int) -> torch.Tensor:
        """Seed k's slice of a `stacked` tensor shaped as parameter `name`, in a seed's own layout."""
        return stacked[k, 0].clone()


class _StackedLayer(_SeedStacked):
    """N layers of one shape (`nn.Linear` or `nn.Conv2d`), each parameter stacked by seed on dim 0 in the layout
    its kernel reads: here baddbmm's, weight [N, in, out] and bias [N, 1, out]."""

    def __init__(self, layers: list[nn.Linear] | list[nn.Conv2d]):
        super().__init__()
        self.seed_shape = tuple(layers[0].weight.shape)
        self.weight = nn.Parameter(self.stacked("weight", [layer.weight.detach() for layer in layers]))
        self.bias = nn.Parameter(self.stacked("bias", [cast(torch.Tensor, layer.bias).detach() for layer in layers]))

    def stacked(self, name: str, tensors: list[torch.Tensor]) -> torch.Tensor:
        if name == "bias":
            return super().stacked(name, tensors)
        return torch.stack([tensor.reshape(len(tensor), -1).t() for tensor in tensors]).contiguous()

    def seed_tensor(self, name: str, stacked: torch.Tensor, k: int) -> torch.Tensor:
        if name == "bias":
            return super().seed_tensor(name, stacked, k)
        return stacked[k].t().reshape(self.seed_shape).clone()

    def stacked_weights(self, seeds: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        return (self.weight, self.bias) if seeds is None else (self.weight[seeds], self.bias[seeds])


class StackedLinear(_StackedLayer):
    """N `nn.Linear`s of one shape."""

    def forward(self, x: torch.Tensor, seeds: torch.Tensor | None) -> torch.Tensor:
        """x [m, B, in] -> [m, B, out], for all seeds (None) or the m `seeds` (indices into the stack)."""
        weight, bias = self.stacked_weights(seeds)
        if weight.shape[-1] == 1:  # baddbmm's kernel for a 1-wide output at N = 1 rounds unlike at N > 1
            return (x * weight.transpose(1, 2)).sum(-1, keepdim=True) + bias
        return torch.baddbmm(bias, x, weight)


class StackedConv2d(_StackedLayer):
    """N `nn.Conv2d`s of one shape (no padding, dilation or groups), each seed's images through its own `conv2d`
    (weight [N, out, in, rows, columns], a seed's own layout stacked; bias [N, out]). One call per seed gives a seed
    the same kernel, hence the same bits, whichever seeds sit beside it, and costs per seed what one `nn.Conv2d` does:
    grouped `conv2d` (groups = N) gave a seed other bits at N = 1 than among others (the 3-channel first layer
    on MiniGrid's 7×7 view, one thread), and a matmul over unfolded patches cost several times `nn.Conv2d`'s
    convolution on these small images."""

    def __init__(self, convs: list[nn.Conv2d]):
        super().__init__(convs)
        first = convs[0]
        if first.padding != (0, 0) or first.dilation != (1, 1) or first.groups != 1:
            raise ValueError(f"the stacked engine runs convolutions without padding, dilation or groups: {first}")
        self.stride = first.stride

    def stacked(self, name: str, tensors: list[torch.Tensor]) -> torch.Tensor:
        return torch.stack(tensors)

    def seed_tensor(self, name: str, stacked: torch.Tensor, k: int) -> torch.Tensor:
        return stacked[k].clone()

    def forward(self, x: torch.Tensor, seeds: torch.Tensor | None) -> torch.Tensor:
        """x [m, B, C, H, W] -> [m, B, out, H', W']."""
        weights, biases = (tensor.unbind() for tensor in self.stacked_weights(seeds))
        return torch.stack(
            [
                nn.functional.conv2d(images, weight, bias, self.stride)
                for images, weight, bias in zip(x.unbind(), weights, biases)
            ]
        )


STACKED_LAYERS: dict[type[nn.Module], type[_StackedLayer]] = {nn.Linear: StackedLinear, nn.Conv2d: StackedConv2d}
STATELESS = (nn.Tanh, nn.ReLU, ImageScale)  # elementwise: the same on [m, B, ...]


def _layers(module: nn.Module, name: str) -> list[tuple[str, nn.Module]]:
    """A module's leaves in forward order, named as a seed's `ActorCritic.state_dict` names them."""
    return [
        (f"{name}.{leaf}" if leaf else name, layer)
        for leaf, layer in module.named_modules()
        if not list(layer.children()) and not isinstance(layer, nn.Sequential)  # an empty body (Pong's) is no layer
    ]


class _StackedPath(nn.ModuleList):
    """One path of a seed's network (the feature extractor, a body), its layers stacked by seed in forward order."""

    def __init__(self, models: list[ActorCritic], path: str):
        named = _layers(getattr(models[0], path), path)
        per_model = [[layer for _, layer in _layers(getattr(model, path), path)] for model in models]
        layers: list[nn.Module] = []
        for same_layer in zip(*per_model):
            layer = same_layer[0]
            if type(layer) in STACKED_LAYERS:
                layers.append(STACKED_LAYERS[type(layer)](list(same_layer)))
            elif isinstance(layer, nn.Flatten):
                layers.append(nn.Flatten(2))  # the seed and batch dims stay
            elif isinstance(layer, STATELESS):
                layers.append(layer)
            else:
                raise ValueError(f"the stacked engine cannot stack {path}'s {type(layer).__name__}")
        super().__init__(layers)
        self.names = [name for name, layer in named if type(layer) in STACKED_LAYERS]  # a seed's own, of each

    def forward(self, x: torch.Tensor, seeds: torch.Tensor | None) -> torch.Tensor:
        for layer in self:
            x = layer(x, seeds) if isinstance(layer, _StackedLayer) else layer(x)
        return x

    def stacked_layers(self) -> list[_StackedLayer]:
        return [layer for layer in self if isinstance(layer, _StackedLayer)]


class StackedCategoricalHead(nn.Module):
    """N `CategoricalHead`s: their logits' Linears stacked; a seed's head's arithmetic on [m, B] records."""

    def __init__(self, heads: list[CategoricalHead]):
        super().__init__()
        self.linear = StackedLinear([head.linear for head in heads])

    def forward(self, latent: torch.Tensor, seeds: torch.Tensor | None) -> torch.Tensor:
        return self.linear(latent, seeds)

    def log_prob_entropy(
        self, logits: torch.Tensor, actions: torch.Tensor, seeds: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        log_prob, entropy = CategoricalHead.log_prob_entropy(logits.flatten(0, 1), actions.flatten())
        return log_prob.view(actions.shape[:2]), entropy.view(actions.shape[:2])

    def sample(self, logits: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        return CategoricalHead.sample(logits, noise)

    def own_parameters(self) -> list[tuple[str, _SeedStacked, str]]:
        """Its parameters other than its Linear's: (its name in a seed's head, the holder, the attribute)."""
        return []


class StackedGaussianHead(_SeedStacked):
    """N `GaussianHead`s: their means' Linears stacked, each seed's log std [N, 1, action_dim]; a seed's head's
    arithmetic on [m, B, action_dim] records, each seed's with its own log std."""

    def __init__(self, heads: list[GaussianHead]):
        super().__init__()
        self.linear = StackedLinear([head.linear for head in heads])
        self.log_std = nn.Parameter(self.stacked("log_std", [head.log_std.detach() for head in heads]))

    def forward(self, latent: torch.Tensor, seeds: torch.Tensor | None) -> torch.Tensor:
        return self.linear(latent, seeds)

    def seeds_log_std(self, seeds: torch.Tensor | None) -> torch.Tensor:
        return self.log_std if seeds is None else self.log_std[seeds]

    def log_prob_entropy(
        self, mean: torch.Tensor, actions: torch.Tensor, seeds: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return GaussianHead.gaussian_log_prob_entropy(mean, self.seeds_log_std(seeds), actions)

    def sample(self, mean: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        return GaussianHead.gaussian_sample(mean, self.log_std, noise)

    def own_parameters(self) -> list[tuple[str, _SeedStacked, str]]:
        return [("log_std", self, "log_std")]


class StackedActorCritic(nn.Module):
    """`ActorCritic`s of one config stacked by seed: an MLP's or a CNN's features, a categorical (discrete
    actions) or a Gaussian (continuous) action head."""

    def __init__(self, models: list[ActorCritic]):
        super().__init__()
        self.n_seeds = len(models)
        self.features = _StackedPath(models, "features")
        self.pi_body = _StackedPath(models, "pi_body")
        self.vf_body = _StackedPath(models, "vf_body")
        heads = [model.action_head for model in models]
        self.action_head: StackedCategoricalHead | StackedGaussianHead = (
            StackedGaussianHead(cast(list[GaussianHead], heads))
            if isinstance(heads[0], GaussianHead)
            else StackedCategoricalHead(cast(list[CategoricalHead], heads))
        )
        self.value_head = StackedLinear([model.value_head for model in models])

    @classmethod
    def from_seeds(
        cls, observation_space: gym.Space, action_space: gym.Space, net: NetworkConfig, seeds: list[int]
    ) -> StackedActorCritic:
        """Each seed's `ActorCritic` as its `network` stream initialises it, stacked in `seeds`' order."""
        return cls(
            [
                ActorCritic(observation_space, action_space, net, torch_generator(spawn_streams(seed)["network"]))
                for seed in seeds
            ]
        )

    @property
    def device(self) -> torch.device:
        """Where the stack's parameters live (the run's `device`): the tensors it is given are moved there."""
        return self.value_head.weight.device

    def forward(self, obs: torch.Tensor, seeds: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """obs [m, B, *obs_shape] -> (the action head's output [m, B, actions or action_dim], values [m, B]),
        m = all seeds or len(seeds)."""
        n = self.n_seeds if seeds is None else len(seeds)
        if obs.shape[0] != n:
            raise ValueError(f"observations for {obs.shape[0]} seeds, the stack runs {n}")
        features = self.features(obs, seeds)
        values = self.value_head(self.vf_body(features, seeds), seeds).squeeze(-1)
        return self.action_head(self.pi_body(features, seeds), seeds), values

    def policy_output(self, obs: torch.Tensor, seeds: torch.Tensor | None = None) -> torch.Tensor:
        """The policy's half of `forward` (influence attributes the policy alone)."""
        return self.action_head(self.pi_body(self.features(obs, seeds), seeds), seeds)

    def log_prob_entropy(
        self, head_out: torch.Tensor, actions: torch.Tensor, seeds: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The seed's action head on [m, B] records: (log π(a|s), entropy), each [m, B]."""
        return self.action_head.log_prob_entropy(head_out, actions, seeds)

    @torch.no_grad()
    def sample_actions(self, obs: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        """Every seed's actions (obs [N, B, ...]) from its pre-drawn noise [N, B, ...] (its action_head.draw_noise)."""
        return self.action_head.sample(self.policy_output(obs), noise)

    def seed_parameters(self) -> list[tuple[str, _SeedStacked, str]]:
        """Each stacked parameter: (a seed's `state_dict` key, the module holding it, its attribute)."""
        layers = [
            *(
                pair
                for path in (self.features, self.pi_body, self.vf_body)
                for pair in zip(path.names, path.stacked_layers())
            ),
            ("action_head.linear", self.action_head.linear),
            ("value_head", self.value_head),
        ]
        return [
            *((f"action_head.{name}", holder, attr) for name, holder, attr in self.action_head.own_parameters()),
            *((f"{name}.{attr}", layer, attr) for name, layer in layers for attr in ("weight", "bias")),
        ]

    def seed_state_dict(self, k: int) -> dict[str, torch.Tensor]:
        """Seed k's parameters as `ActorCritic.state_dict()` names them (its checkpoint, its replay)."""
        return {key: layer.seed_tensor(attr, getattr(layer, attr), k) for key, layer, attr in self.seed_parameters()}


class SeedCritic:
    """Seed k of a stack as a rollout computes its records with it (control/collect.py's Critic): numpy in,
    numpy out, through the stack's kernels (a slice's bits do not depend on the stack's other seeds)."""

    def __init__(self, model: StackedActorCritic, k: int):
        self.model, self.seeds = model, torch.tensor([k], device=model.device)

    def _on_device(self, values: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(values, device=self.model.device).unsqueeze(0)

    @torch.no_grad()
    def values_and_log_probs(self, obs: np.ndarray, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        head_out, values = self.model(self._on_device(obs), self.seeds)
        log_prob, _ = self.model.log_prob_entropy(head_out, self._on_device(actions), self.seeds)
        return values[0].cpu().numpy(), log_prob[0].cpu().numpy()

    @torch.no_grad()
    def values(self, obs: np.ndarray) -> np.ndarray:
        return self.model(self._on_device(obs), self.seeds)[1][0].cpu().numpy()
