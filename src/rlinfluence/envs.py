"""Environment construction from config: a gymnasium id, its kwargs, and named wrappers.

Env-specific preprocessing lives here as wrappers listed in `conf/env/*.yaml`, so the round loop
never asks which env it runs.
"""

from __future__ import annotations

from typing import Callable

import gymnasium as gym
import numpy as np

from rlinfluence.config import EnvConfig


class OneHotObservation(gym.ObservationWrapper):
    """Discrete observations as one-hot float vectors (what SB3's preprocess_obs does)."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.n = int(env.observation_space.n)
        self.observation_space = gym.spaces.Box(0.0, 1.0, (self.n,), np.float32)

    def observation(self, observation: int) -> np.ndarray:
        one_hot = np.zeros(self.n, np.float32)
        one_hot[observation] = 1.0
        return one_hot


class ChannelFirstImage(gym.ObservationWrapper):
    """HWC uint8 images to CHW (torch's conv layout); kept uint8 so buffers stay small."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        h, w, c = env.observation_space.shape
        self.observation_space = gym.spaces.Box(0, 255, (c, h, w), np.uint8)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(observation.transpose(2, 0, 1))


def _minigrid_image(env: gym.Env) -> gym.Env:
    from minigrid.wrappers import ImgObsWrapper

    return ChannelFirstImage(ImgObsWrapper(env))


WRAPPERS: dict[str, Callable[[gym.Env], gym.Env]] = {
    "one_hot": OneHotObservation,
    "minigrid_image": _minigrid_image,
}


def make_env(env_cfg: EnvConfig) -> gym.Env:
    env = gym.make(env_cfg.id, **dict(env_cfg.make_kwargs))
    for name in env_cfg.wrappers:
        if name not in WRAPPERS:
            raise ValueError(f"env.wrappers: {name!r} is not one of: {', '.join(WRAPPERS)}")
        env = WRAPPERS[name](env)
    return env


def to_env_action(action_space: gym.Space, action: np.ndarray):
    """Discrete: the index. Box: clipped to the bounds (the unclipped sample is what is recorded)."""
    if isinstance(action_space, gym.spaces.Discrete):
        return int(action)
    return np.clip(action, action_space.low, action_space.high)
