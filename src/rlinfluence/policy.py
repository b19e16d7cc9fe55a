"""What the PPO update (update.py) and the influence (influence.py) ask of a control policy.

A Protocol, so that those two depend on the shape of an actor-critic and not on the network that implements it
(control/networks.py's `ActorCritic` is the one the control agent builds): the attribution API can score any
module that has these members, and the layers below control/ import nothing of it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

import torch
from torch import nn


class ActionHead(Protocol):
    def log_prob_entropy(self, head_out: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """log π(a|s) and the entropy of π(·|s), from the head's output for s (logits, or a Gaussian's mean)."""
        ...


class ActorCriticPolicy(Protocol):
    @property
    def action_head(self) -> ActionHead: ...

    @property
    def device(self) -> torch.device: ...

    def __call__(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The action head's output and the value, for a batch of observations."""
        ...

    def policy_output(self, obs: torch.Tensor) -> torch.Tensor:
        """The action head's output alone (the policy's parameters only)."""
        ...

    def policy_parameter_names(self) -> list[str]:
        """The names (as `named_parameters` gives them) of the parameters π depends on: influence's θ."""
        ...

    def parameters(self) -> Iterator[nn.Parameter]: ...

    def named_parameters(self) -> Iterator[tuple[str, nn.Parameter]]: ...
