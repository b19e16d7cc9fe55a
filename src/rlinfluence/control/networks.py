"""Actor-critic networks with the semantics of SB3 2.x PPO policies.

A shared feature extractor (identity-flatten for vectors, a CNN for images) feeds separate
policy and value MLPs (Tanh), then an action head and a value head. Orthogonal init with SB3's
gains. The action head hides the action-space kind, so every other module (loss, influence,
targets, collection) works unchanged for discrete and continuous actions.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlinfluence.choices import chosen
from rlinfluence.config.schema import NetworkConfig
from rlinfluence.envs.make import space_shape

ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU}


class CategoricalHead(nn.Module):
    """Discrete actions: logits; actions are stored as float and cast to indices here."""

    init_gain = 0.01

    def __init__(self, in_dim: int, n_actions: int):
        super().__init__()
        self.linear = nn.Linear(in_dim, n_actions)

    def forward(self, latent: torch.Tensor) -> torch.Tensor:
        return self.linear(latent)

    def log_prob(self, logits: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        index = actions.long().reshape(-1, 1)
        return torch.log_softmax(logits, dim=-1).gather(-1, index).squeeze(-1)

    @staticmethod  # reads nothing of the head: the stacked engine (control/stacked_networks.py) calls it on its logits
    def log_prob_entropy(logits: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        log_p = torch.log_softmax(logits, dim=-1)  # shared by both: the update needs both every step
        log_prob = log_p.gather(-1, actions.long().reshape(-1, 1)).squeeze(-1)
        return log_prob, -(log_p.exp() * log_p).sum(-1)

    def draw_noise(self, batch_shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
        """Gumbel noise: argmax(logits + noise) is a sample of the softmax policy."""
        uniform = torch.rand((*batch_shape, self.linear.out_features), generator=generator)
        return -torch.log(-torch.log(uniform.clamp_min(1e-20)))

    @staticmethod  # as log_prob_entropy: the stacked engine samples all seeds' actions from their stacked logits
    def sample(logits: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        return (logits + noise).argmax(-1).float()


class GaussianHead(nn.Module):
    """Continuous actions: diagonal Gaussian with a state-independent log-std (SB3's default)."""

    init_gain = 0.01

    def __init__(self, in_dim: int, action_dim: int):
        super().__init__()
        self.linear = nn.Linear(in_dim, action_dim)
        self.log_std = nn.Parameter(torch.zeros(action_dim))

    def forward(self, latent: torch.Tensor) -> torch.Tensor:
        return self.linear(latent)

    def log_prob(self, mean: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        return self.gaussian_log_prob(mean, self.log_std, actions)

    def log_prob_entropy(self, mean: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.gaussian_log_prob_entropy(mean, self.log_std, actions)

    def draw_noise(self, batch_shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
        return torch.randn((*batch_shape, self.linear.out_features), generator=generator)

    def sample(self, mean: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        return self.gaussian_sample(mean, self.log_std, noise)

    # The head's arithmetic on a given log std, which broadcasts against the means (the stacked engine,
    # control/stacked_networks.py, passes each seed's as [seeds, 1, action_dim] against means [seeds, records,
    # action_dim]).

    @staticmethod
    def gaussian_log_prob(mean: torch.Tensor, log_std: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        z = (actions - mean) * torch.exp(-log_std)
        return (-0.5 * z.pow(2) - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)

    @staticmethod
    def gaussian_log_prob_entropy(
        mean: torch.Tensor, log_std: torch.Tensor, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        per_dim_entropy = 0.5 + 0.5 * math.log(2 * math.pi) + log_std
        entropy = per_dim_entropy.sum(-1).expand(mean.shape[:-1])
        return GaussianHead.gaussian_log_prob(mean, log_std, actions), entropy

    @staticmethod
    def gaussian_sample(mean: torch.Tensor, log_std: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        return mean + noise * torch.exp(log_std)


def mlp(in_dim: int, sizes: list[int], activation: str) -> tuple[nn.Sequential, int]:
    layers: list[nn.Module] = []
    for size in sizes:
        layers += [nn.Linear(in_dim, size), ACTIVATIONS[activation]()]
        in_dim = size
    return nn.Sequential(*layers), in_dim


class ImageScale(nn.Module):
    """uint8 images are stored as such in the buffer and scaled to [0, 1] here, as SB3 does."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.float() / 255.0


def _paper_minigrid_convs(channels: int) -> nn.Sequential:
    """The paper's MiniGrid extractor."""
    return nn.Sequential(
        ImageScale(), nn.Conv2d(channels, 16, 3), nn.ReLU(), nn.Conv2d(16, 32, 3), nn.ReLU(), nn.Flatten()
    )


def _nature_convs(channels: int) -> nn.Sequential:
    """Mnih et al. 2015, as SB3's NatureCNN."""
    return nn.Sequential(
        ImageScale(),
        nn.Conv2d(channels, 32, 8, stride=4),
        nn.ReLU(),
        nn.Conv2d(32, 64, 4, stride=2),
        nn.ReLU(),
        nn.Conv2d(64, 64, 3, stride=1),
        nn.ReLU(),
        nn.Flatten(),
    )


Extractor = Callable[[tuple[int, ...], int], tuple[nn.Module, int]]  # (obs shape, features_dim) -> (module, width)


def _flat(obs_shape: tuple[int, ...], features_dim: int) -> tuple[nn.Module, int]:
    return nn.Flatten(), int(np.prod(obs_shape))


def _convolutional(convolutions: Callable[[int], nn.Sequential]) -> Extractor:
    """Convolutions over a channel-first image, then a Linear to features_dim and a ReLU."""

    def extractor(obs_shape: tuple[int, ...], features_dim: int) -> tuple[nn.Module, int]:
        convs = convolutions(obs_shape[0])
        with torch.no_grad():
            flat = convs(torch.zeros(1, *obs_shape)).shape[1]
        return nn.Sequential(convs, nn.Linear(flat, features_dim), nn.ReLU()), features_dim

    return extractor


# env.network.kind -> its feature extractor (features_dim: the width of an image extractor's output)
FEATURE_EXTRACTORS: dict[str, Extractor] = {
    "mlp": _flat,
    "cnn": _convolutional(_paper_minigrid_convs),
    "nature_cnn": _convolutional(_nature_convs),
}


def feature_extractor(kind: str, obs_shape: tuple[int, ...], features_dim: int) -> tuple[nn.Module, int]:
    return chosen(FEATURE_EXTRACTORS, "env.network.kind", kind)(obs_shape, features_dim)


class ActorCritic(nn.Module):
    def __init__(
        self, observation_space: gym.Space, action_space: gym.Space, net: NetworkConfig, generator: torch.Generator
    ):
        super().__init__()
        self.features, features_dim = feature_extractor(net.kind, space_shape(observation_space), net.features_dim)
        self.pi_body, pi_dim = mlp(features_dim, list(net.pi), net.activation)
        self.vf_body, vf_dim = mlp(features_dim, list(net.vf), net.activation)
        if isinstance(action_space, gym.spaces.Discrete):
            self.action_head: CategoricalHead | GaussianHead = CategoricalHead(pi_dim, int(action_space.n))
        elif isinstance(action_space, gym.spaces.Box):
            self.action_head = GaussianHead(pi_dim, int(np.prod(action_space.shape)))
        else:
            raise ValueError(f"unsupported action space {action_space}")
        self.value_head = nn.Linear(vf_dim, 1)
        self._orthogonal_init(generator)

    def _orthogonal_init(self, generator: torch.Generator) -> None:
        gains = [
            (self.features, math.sqrt(2)),
            (self.pi_body, math.sqrt(2)),
            (self.vf_body, math.sqrt(2)),
            (self.action_head, self.action_head.init_gain),
            (self.value_head, 1.0),
        ]
        for module, gain in gains:
            for layer in module.modules():
                if isinstance(layer, (nn.Linear, nn.Conv2d)):
                    nn.init.orthogonal_(layer.weight, gain=gain, generator=generator)
                    assert layer.bias is not None  # every layer here is built with one
                    nn.init.zeros_(layer.bias)

    def policy_parameter_names(self) -> list[str]:
        """The parameters the policy's log-prob depends on: what influence attributes."""
        prefixes = ("features.", "pi_body.", "action_head.")
        return [name for name, _ in self.named_parameters() if name.startswith(prefixes)]

    def policy_latent(self, obs: torch.Tensor) -> torch.Tensor:
        """The policy's penultimate layer: the state representation its action head reads."""
        return self.pi_body(self.features(obs))

    def policy_output(self, obs: torch.Tensor) -> torch.Tensor:
        return self.action_head(self.policy_latent(obs))

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = self.features(obs)
        head_out = self.action_head(self.pi_body(features))
        value = self.value_head(self.vf_body(features)).squeeze(-1)
        return head_out, value

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.value_head(self.vf_body(self.features(obs))).squeeze(-1)

    # numpy in, numpy out: what the env loops (collection, evaluation) need, on any device.

    @property
    def device(self) -> torch.device:
        return self.value_head.weight.device

    @torch.no_grad()
    def sample_actions(self, obs: np.ndarray, noise: torch.Tensor) -> np.ndarray:
        """Actions from pre-drawn noise (action_head.draw_noise, on the CPU generator): drawing a
        whole round's noise at once is much cheaper than one sampler call per step, and as reproducible."""
        head_out = self.policy_output(torch.as_tensor(obs, device=self.device))
        return self.action_head.sample(head_out, noise.to(self.device)).cpu().numpy()

    @torch.no_grad()
    def values_and_log_probs(self, obs: np.ndarray, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        head_out, values = self(torch.as_tensor(obs, device=self.device))
        log_probs = self.action_head.log_prob(head_out, torch.as_tensor(actions, device=self.device))
        return values.cpu().numpy(), log_probs.cpu().numpy()

    @torch.no_grad()
    def values(self, obs: np.ndarray) -> np.ndarray:
        return self.value(torch.as_tensor(obs, device=self.device)).cpu().numpy()
