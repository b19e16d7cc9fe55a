"""A round's records, and the control agent's: the rollout buffer, one record per environment step.

A record is (s, a, log π_old, V_old, r, done, Â, return, δ). Records are laid out env-major
(id = env_index * n_steps + t), and every selection, score and minibatch refers to them by id.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Protocol

import numpy as np
import torch

# A batch of observations: a tensor (N, *obs_shape), or, for a Dict observation space (SB3's MultiInputPolicy),
# a dict of such tensors, one per key. Rows are records in both.
Observations = torch.Tensor | dict[str, torch.Tensor]


def take(observations: Observations, ids: slice | torch.Tensor) -> Observations:
    """The rows `ids` of a batch of observations, of every key of a dict."""
    if isinstance(observations, dict):
        return {key: value[ids] for key, value in observations.items()}
    return observations[ids]


def observations_to(observations: Observations, device: torch.device) -> Observations:
    if isinstance(observations, dict):
        return {key: value.to(device) for key, value in observations.items()}
    return observations.to(device)


class Records(Protocol):
    """What the round loop and the selection methods that serve every agent read of a round's records: how
    many there are (ids 0..n−1). `RolloutBuffer` (control) and lm/rollout.py's `Sequences` are Records."""

    def __len__(self) -> int: ...


class PlantedRecords(Records, Protocol):
    """The records of an agent that plants bad data (corruption.py): `RolloutBuffer`, `Sequences`."""

    planted: torch.Tensor | None  # bool per record id: corrupted this round; None in a clean run


@dataclass
class RolloutBuffer:
    obs: torch.Tensor  # (N, *obs_shape); uint8 for images
    actions: torch.Tensor  # (N,) discrete indices as float, or (N, action_dim)
    log_probs: torch.Tensor  # log π_θk(a|s) at collection
    values: torch.Tensor  # V_θk(s)
    rewards: torch.Tensor  # with γ·V(final obs) added on time-limit truncation
    dones: torch.Tensor  # the episode ended at this step (terminated or truncated)
    advantages: torch.Tensor  # raw GAE(γ, λ) advantages Â
    returns: torch.Tensor  # Â + V, the value target
    deltas: torch.Tensor  # one-step TD errors r + γV(s') − V(s) at θ_k
    env_index: torch.Tensor  # which training env produced the record
    step: torch.Tensor  # the step t within the round
    state_keys: torch.Tensor | None = None  # int64 id of the true state s (env.state_key); None if the env has none
    planted: torch.Tensor | None = None  # bool: the record was corrupted (corruption.py); None in a clean run

    def __len__(self) -> int:
        return self.obs.shape[0]

    def _map(self, fn) -> RolloutBuffer:
        tensors: dict[str, Any] = {
            f.name: None if getattr(self, f.name) is None else fn(getattr(self, f.name)) for f in fields(self)
        }
        return RolloutBuffer(**tensors)

    def to(self, device: torch.device) -> RolloutBuffer:
        return self._map(lambda tensor: tensor.to(device))

    def time_major(self, values: torch.Tensor) -> np.ndarray:
        """Per-record values back on the (T, n_envs) grid they were collected on."""
        grid = np.zeros((int(self.step.max()) + 1, int(self.env_index.max()) + 1), np.float64)
        grid[self.step.numpy(), self.env_index.numpy()] = values.numpy()
        return grid


def compute_gae(
    rewards: np.ndarray, values: np.ndarray, dones: np.ndarray, last_values: np.ndarray, gamma: float, gae_lambda: float
) -> tuple[np.ndarray, np.ndarray]:
    """GAE over (T, n_envs) arrays; returns (advantages, deltas). `dones[t]` ends the episode at t."""
    n_steps = rewards.shape[0]
    advantages = np.zeros_like(rewards)
    deltas = np.zeros_like(rewards)
    running = np.zeros_like(last_values)
    for t in reversed(range(n_steps)):
        next_values = last_values if t == n_steps - 1 else values[t + 1]
        not_done = 1.0 - dones[t]
        deltas[t] = rewards[t] + gamma * next_values * not_done - values[t]
        running = deltas[t] + gamma * gae_lambda * not_done * running
        advantages[t] = running
    return advantages, deltas


def discounted_returns_to_go(buffer: RolloutBuffer, gamma: float) -> np.ndarray:
    """Monte-Carlo return of each record: Σ_j γ^j r_{t+j} to the end of its episode, per record id.

    `rewards` already carry γ·V(final obs) at time-limit truncations (the collector folds it in), and an
    episode still running at the buffer's end is bootstrapped the same way, with γ·V(s_T) of the
    state after the last step. Neither end is a real termination, and cutting them to 0 would bias
    returns down by how close a record sits to the round's end. V(s_T) is recovered from that step's
    TD error, δ = r + γV(s_T)(1 − done) − V(s), so the buffer needs no extra field.
    """
    rewards, dones = buffer.time_major(buffer.rewards), buffer.time_major(buffer.dones)
    last_values = (buffer.time_major(buffer.deltas)[-1] - rewards[-1] + buffer.time_major(buffer.values)[-1]) / gamma
    # GAE with V = 0 and λ = 1 is exactly the discounted return-to-go with that bootstrap.
    returns, _ = compute_gae(rewards, np.zeros_like(rewards), dones, last_values, gamma, 1.0)
    return returns.T.reshape(-1)[buffer.env_index.numpy() * rewards.shape[0] + buffer.step.numpy()]


def episode_ids(buffer: RolloutBuffer) -> np.ndarray:
    """Each record's episode within the round, numbered 0, 1, ... in (env, step) order (so, in the env-major
    layout, by their first record's id). A new one starts at each env's first step of the round and after
    each done; an episode the round's start or end cuts is a part of its own (its other part lies in
    another round's buffer, which no selection sees)."""
    env, step = buffer.env_index.cpu().numpy(), buffer.step.cpu().numpy()
    order = np.lexsort((step, env))  # each env's steps in time order
    ended = buffer.dones.cpu().numpy()[order] > 0
    starts = np.ones(len(order), bool)
    starts[1:] = (env[order][1:] != env[order][:-1]) | ended[:-1]
    ids = np.empty(len(order), np.int64)
    ids[order] = np.cumsum(starts) - 1
    return ids


def env_major(array: np.ndarray) -> torch.Tensor:
    """(T, n_envs, ...) → (n_envs * T, ...), so each env's steps stay contiguous."""
    swapped = np.swapaxes(array, 0, 1)
    return torch.as_tensor(swapped.reshape(-1, *array.shape[2:]))
