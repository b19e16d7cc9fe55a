"""SB3's rollout buffer, whose minibatches skip the records dropped this round."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import numpy as np
from gymnasium import spaces
from stable_baselines3.common.buffers import DictRolloutBuffer, RolloutBuffer

# What SB3's RolloutBuffer.get flattens before drawing minibatches besides the observations (its own list).
_FLATTENED = ("actions", "values", "log_probs", "advantages", "returns")
# Action spaces whose records the attribution API scores: SB3's Categorical and diagonal Gaussian heads.
SUPPORTED_ACTION_SPACES = (spaces.Discrete, spaces.Box)


def check_action_space(action_space: spaces.Space) -> None:
    if not isinstance(action_space, SUPPORTED_ACTION_SPACES):
        raise ValueError(
            f"action space {action_space} is not supported by rlinfluence.sb3 "
            f"(supported: {', '.join(space.__name__ for space in SUPPORTED_ACTION_SPACES)})"
        )


class IIFRolloutBuffer(RolloutBuffer):
    """`PPO(..., rollout_buffer_class=IIFRolloutBuffer)`, for Box, Discrete and Dict observation spaces (a Dict
    space gets `IIFDictRolloutBuffer`, SB3's DictRolloutBuffer layout). Until `drop` is called in a round,
    `get` is SB3's own (same minibatches, same RNG draws); after it, each epoch shuffles only the kept
    records into minibatches of `batch_size` (the last one may be smaller), with numpy's global RNG as SB3 does.

    Record ids are SB3's flat order: env-major, id = env_index * n_steps + step (`swap_and_flatten`)."""

    kept_ids: np.ndarray | None = None

    def __new__(cls, buffer_size: int, observation_space: spaces.Space, *args: Any, **kwargs: Any):
        # SB3 builds `rollout_buffer_class` as given; only its default picks the Dict layout for a Dict space.
        if cls is IIFRolloutBuffer and isinstance(observation_space, spaces.Dict):
            return super().__new__(IIFDictRolloutBuffer)
        return super().__new__(cls)

    def __init__(self, buffer_size: int, observation_space: spaces.Space, action_space: spaces.Space, *args, **kwargs):
        check_action_space(action_space)  # refused when the model is built, not after its first rollout
        super().__init__(buffer_size, observation_space, action_space, *args, **kwargs)

    def reset(self) -> None:
        super().reset()
        self.kept_ids = None

    def drop(self, ids: np.ndarray) -> None:
        keep = np.ones(self.buffer_size * self.n_envs, bool)
        keep[ids] = False
        self.kept_ids = np.flatnonzero(keep)

    def _flatten_observations(self) -> None:
        self.observations = self.swap_and_flatten(self.observations)

    def get(self, batch_size: int | None = None) -> Generator[Any, None, None]:
        if self.kept_ids is None:
            yield from super().get(batch_size)
            return
        if not self.generator_ready:
            self._flatten_observations()
            for name in _FLATTENED:
                self.__dict__[name] = self.swap_and_flatten(self.__dict__[name])
            self.generator_ready = True
        order = np.random.permutation(self.kept_ids)
        size = batch_size or len(order)
        for start in range(0, len(order), size):
            yield self._get_samples(order[start : start + size])


class IIFDictRolloutBuffer(IIFRolloutBuffer, DictRolloutBuffer):
    """IIFRolloutBuffer over SB3's DictRolloutBuffer (MultiInputPolicy): observations are a dict of arrays."""

    observations: dict[str, np.ndarray]

    def _flatten_observations(self) -> None:
        for key, obs in self.observations.items():
            self.observations[key] = self.swap_and_flatten(obs)
