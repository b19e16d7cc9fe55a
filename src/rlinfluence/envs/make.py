"""Environment construction from config: a gymnasium id, its kwargs, and named wrappers.

Env-specific preprocessing lives here as wrappers listed in `conf/env/*.yaml`, so the round loop
never asks which env it runs. `env_cfg` is the config's `env` node (config/schema.py's EnvConfig), typed by what
this module reads of it (`EnvSettings`): envs/ sits below config/, whose `${from_spaces:...}` resolver calls
this module's rule.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, cast

import gymnasium as gym
import numpy as np
from omegaconf import OmegaConf

from rlinfluence.choices import chosen, require_one_of
from rlinfluence.envs.ids import current_id


class EnvSettings(Protocol):
    """What envs/ reads of the env settings (config/schema.py's EnvConfig has these fields)."""

    @property
    def id(self) -> str: ...

    @property
    def make_kwargs(self) -> Mapping[str, Any]: ...

    @property
    def train_make_kwargs(self) -> Mapping[str, Any]: ...

    @property
    def wrappers(self) -> Sequence[str]: ...

    @property
    def state_key(self) -> str | None: ...

    @property
    def atari(self) -> Any: ...  # the atari wrapper's settings (config/schema.py's AtariConfig), or None


class OneHotObservation(gym.ObservationWrapper):
    """Discrete observations as one-hot float vectors (what SB3's preprocess_obs does)."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.n = int(cast(gym.spaces.Discrete, env.observation_space).n)
        self.observation_space = gym.spaces.Box(0.0, 1.0, (self.n,), np.float32)

    def observation(self, observation: int) -> np.ndarray:
        one_hot = np.zeros(self.n, np.float32)
        one_hot[observation] = 1.0
        return one_hot


class ChannelFirstImage(gym.ObservationWrapper):
    """HWC uint8 images to CHW (torch's conv layout); kept uint8 so buffers stay small."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        h, w, c = cast(gym.spaces.Box, env.observation_space).shape
        self.observation_space = gym.spaces.Box(0, 255, (c, h, w), np.uint8)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(observation.transpose(2, 0, 1))


def _one_hot(env: gym.Env, env_cfg: EnvSettings) -> gym.Env:
    return OneHotObservation(env)


def _channel_first(env: gym.Env, env_cfg: EnvSettings) -> gym.Env:
    return ChannelFirstImage(env)


def _minigrid_image(env: gym.Env, env_cfg: EnvSettings) -> gym.Env:
    from minigrid.wrappers import ImgObsWrapper

    return ChannelFirstImage(ImgObsWrapper(env))


def _atari(env: gym.Env, env_cfg: EnvSettings) -> gym.Env:
    """The standard Atari preprocessing (Mnih et al. 2015; rl-zoo's AtariWrapper + frame_stack), with
    env.atari's settings: no-op starts, frame skip with max-pooling, square grayscale frames, stacked,
    uint8, channel-first. The env must not skip frames itself (use the *NoFrameskip-v4 ids)."""
    from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

    settings = env_cfg.atari
    assert settings is not None  # validation.validate refuses the atari wrapper without them
    env = AtariPreprocessing(
        env,
        noop_max=settings.noop_max,
        frame_skip=settings.frame_skip,
        screen_size=settings.screen_size,
        terminal_on_life_loss=settings.terminal_on_life_loss,
        grayscale_obs=True,
    )  # one channel a frame: the stack is the CNN's channels
    return FrameStackObservation(env, settings.frame_stack)  # stacks on a new leading axis: (stack, size, size)


# env.wrappers: each name's wrapper, applied in the listed order
WRAPPERS: dict[str, Callable[[gym.Env, EnvSettings], gym.Env]] = {
    "one_hot": _one_hot,
    "minigrid_image": _minigrid_image,
    "atari": _atari,
    "channel_first": _channel_first,
}


def chosen_make_kwargs(env_cfg: EnvSettings, collection: bool = False) -> Any:
    """env.make_kwargs; the collection env's have env.train_make_kwargs merged over them (evaluation keeps
    env.make_kwargs)."""
    if not (collection and env_cfg.train_make_kwargs):
        return env_cfg.make_kwargs
    kwargs = (env_cfg.make_kwargs, env_cfg.train_make_kwargs)
    return OmegaConf.merge(*(OmegaConf.to_container(given, resolve=True) for given in kwargs))


def make_env(env_cfg: EnvSettings, wrappers: list[str] | None = None, collection: bool = False) -> gym.Env:
    """env.id made with its make kwargs (`chosen_make_kwargs`), then wrapped in `wrappers` (default:
    env.wrappers)."""
    env = gym.make(current_id(env_cfg.id), **dict(chosen_make_kwargs(env_cfg, collection)))
    for name in env_cfg.wrappers if wrappers is None else wrappers:
        env = chosen(WRAPPERS, "env.wrappers", name)(env, env_cfg)
    return env


_spaces: dict[str, tuple[gym.Space, gym.Space]] = {}


def built_spaces(env_cfg: EnvSettings, wrappers: list[str], collection: bool = False) -> tuple[gym.Space, gym.Space]:
    """The observation and action spaces of env.id made with its make kwargs (`chosen_make_kwargs`) and
    `wrappers` (built, not stepped; once a process per setting, so a sweep builds each env once). Raises
    what the env raises."""
    make_kwargs = OmegaConf.to_container(chosen_make_kwargs(env_cfg, collection), resolve=True)
    atari = None if env_cfg.atari is None else OmegaConf.to_container(env_cfg.atari)  # sets the frames' shape
    key = json.dumps([env_cfg.id, make_kwargs, wrappers, atari], sort_keys=True, default=str)
    if key not in _spaces:
        env = make_env(env_cfg, wrappers, collection)
        try:
            _spaces[key] = env.observation_space, env.action_space
        finally:
            env.close()
    return _spaces[key]


# ---------------------------------------------------------------- env=gym: the policy from the spaces
# conf/env/gym.yaml runs any registered env.id: its env.wrappers and env.network.kind are
# `${from_spaces:...}` (config/schema.py), decided here from the env's spaces unless the command line sets
# them. The action head needs no rule: ActorCritic gives Discrete actions a categorical head and Box
# actions a diagonal Gaussian.


def is_image(space: gym.Space) -> bool:
    """What a CNN takes: a 3-D uint8 Box (H x W x C as envs give it, C x H x W once wrapped)."""
    return isinstance(space, gym.spaces.Box) and space.dtype == np.uint8 and len(space.shape) == 3


def fitting_wrappers(observations: gym.Space) -> list[str]:
    """What turns env.id's own observation into an array a network takes: a Discrete state one-hot (as SB3
    does), MiniGrid's Dict observation its egocentric image, an H x W x C image channel-first; a vector as it is."""
    if isinstance(observations, gym.spaces.Discrete):
        return ["one_hot"]
    if isinstance(observations, gym.spaces.Dict) and "image" in observations.spaces:
        return ["minigrid_image"]
    return ["channel_first"] if is_image(observations) else []


NATURE_CNN_MIN_SIDE = 36  # the smallest image the Nature CNN's strided convolutions take


def fitting_network(observations: gym.Space) -> str:
    """env.network.kind for the wrapped observation: an image through a CNN (the paper's small MiniGrid one
    where the Nature CNN's strides do not fit, else the Nature CNN), anything else flattened into the MLP."""
    if not is_image(observations):
        return "mlp"
    return "nature_cnn" if min(space_shape(observations)[1:]) >= NATURE_CNN_MIN_SIDE else "cnn"


def from_spaces(key: str, env_cfg: EnvSettings) -> list[str] | str:
    """env.<key> (`wrappers` or `network.kind`) as env.id's spaces call for it. An env that cannot be made
    gets the schema's defaults: validation (check_env) then makes it again and says why in one line."""
    require_one_of("from_spaces' key", key, ("wrappers", "network.kind"))
    try:
        if key == "wrappers":
            return fitting_wrappers(built_spaces(env_cfg, [])[0])
        return fitting_network(built_spaces(env_cfg, list(env_cfg.wrappers))[0])
    except Exception:  # noqa: BLE001 - whatever the env raises, validation reports it
        return [] if key == "wrappers" else "mlp"


# ---------------------------------------------------------------- discrete state keys
# Monte-Carlo advantages (the `advantage` baselines) average returns over all records that share a
# state. The observation is not always that state (MiniGrid's egocentric view looks the same from
# many cells), so an env names a function of its true simulator state here (`env.state_key`), and
# the collector stores one int64 id per record.


def _toy_text_state(env: gym.Env) -> int:
    """FrozenLake, CliffWalking, Taxi: the integer state the one-hot observation encodes."""
    simulator: Any = env.unwrapped  # the toy-text env's own attributes, unknown to gym.Env
    return int(simulator.s)


def _minigrid_pose(env: gym.Env) -> int:
    """MiniGrid tasks whose only changing state is the agent: its cell and heading (4 directions)."""
    base: Any = env.unwrapped  # MiniGridEnv's own attributes, unknown to gym.Env
    x, y = base.agent_pos
    return (int(x) * base.height + int(y)) * 4 + int(base.agent_dir)


STATE_KEYS: dict[str, Callable[[gym.Env], int]] = {
    "toy_text_state": _toy_text_state,
    "minigrid_pose": _minigrid_pose,
}


def _set_toy_text_state(env: gym.Env, key: int) -> None:
    simulator: Any = env.unwrapped
    simulator.s = int(key)


def _set_minigrid_pose(env: gym.Env, key: int) -> None:
    base: Any = env.unwrapped
    cell, base.agent_dir = divmod(int(key), 4)
    base.agent_pos = divmod(cell, base.height)


# The inverse of STATE_KEYS, where the key is the whole state: put a freshly reset env into the state
# a key names (the true advantage of task=diagnose rolls out from there).
STATE_SETTERS: dict[str, Callable[[gym.Env, int], None]] = {
    "toy_text_state": _set_toy_text_state,
    "minigrid_pose": _set_minigrid_pose,
}


def state_key_function(env_cfg: EnvSettings) -> Callable[[gym.Env], int] | None:
    """The env's state-key function, or None when it exposes no discrete state."""
    if env_cfg.state_key is None:
        return None
    return chosen(STATE_KEYS, "env.state_key", env_cfg.state_key)


def space_shape(space: gym.Space) -> tuple[int, ...]:
    """A Box's or Discrete's shape (gymnasium types it optional: some other spaces have none)."""
    assert space.shape is not None, space
    return space.shape


def to_env_actions(action_space: gym.Space, actions: np.ndarray) -> Any:
    """A batch of actions as their envs take them (leading axes: the batch's). Discrete: the indices, as nested lists.
    Box: clipped to the bounds, an array (the unclipped sample is what is recorded)."""
    if isinstance(action_space, gym.spaces.Discrete):
        return actions.astype(np.int64).tolist()  # int() and astype both truncate toward zero
    box = cast(gym.spaces.Box, action_space)
    return np.clip(actions, box.low, box.high)
