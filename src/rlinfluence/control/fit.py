"""Does the env fit the control agent? Its env.id must be makeable as configured, observe an array that
env.network takes and act like its preset's env; env.train_make_kwargs must keep the spaces; an f_action
target's s* and a* must fit them. The control agent's own checks (Trainer.check_config), each one line naming
the key; the analyses that build an action target call `check_action_target` too.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from rlinfluence.choices import ConfigError, require
from rlinfluence.config.compose import ANY_ENV, default_config
from rlinfluence.config.schema import EnvConfig
from rlinfluence.control.networks import ActorCritic
from rlinfluence.envs.make import built_spaces, chosen_make_kwargs, space_shape

FIT_HINT = (
    "use a preset whose spaces fit, or override env.make_kwargs/env.wrappers; for another Gymnasium env use "
    "env=gym env.id=<id>"
)
GYM_FIT_HINT = (  # env=gym's own: the spaces its rule fits (envs/make.py)
    "env=gym fits Box, Discrete and MiniGrid observations and Discrete or Box actions; for others set "
    "env.wrappers/env.network"
)


def fit_hint(env_name: str) -> str:
    return GYM_FIT_HINT if env_name == ANY_ENV else FIT_HINT


def _first_line(error: Exception) -> str:
    return f"{type(error).__name__}: {str(error).strip().splitlines()[0] if str(error).strip() else ''}"


def describe(space: gym.Space) -> str:
    """One line (a Box's repr prints its bounds, over several lines for large ones)."""
    if isinstance(space, gym.spaces.Box):
        return f"Box of shape {space.shape}"
    return str(space).replace("\n", " ")


def action_kind(space: gym.Space) -> str:
    return {gym.spaces.Discrete: "discrete", gym.spaces.Box: "continuous"}.get(type(space), type(space).__name__)


def newest_version(env_id: str) -> str:
    """The registered id of the newest version of `env_id`'s env (`Taxi-v3` -> `Taxi-v4`), module kept."""
    module, colon, bare = env_id.rpartition(":")
    namespace, name, _ = gym.envs.registration.parse_env_id(bare)
    newest = gym.envs.registration.find_highest_version(namespace, name)
    return f"{module}{colon}{gym.envs.registration.get_env_id(namespace, name, newest)}"


def env_spaces(env_cfg: EnvConfig) -> tuple[gym.Space, gym.Space]:
    """The observation and action spaces of env.id made with env.make_kwargs and env.wrappers (built, not
    stepped; envs.make.built_spaces). ConfigError when it cannot be made as configured."""
    try:
        return built_spaces(env_cfg, list(env_cfg.wrappers))
    except gym.error.DeprecatedEnv:
        raise ConfigError(
            f"env.id={env_cfg.id} is an out-of-date version that gymnasium no longer makes; use "
            f"env.id={newest_version(env_cfg.id)}"
        ) from None
    except ModuleNotFoundError as error:  # module:Id's module, or one the env needs, is not installed
        missing = error.__cause__ if isinstance(error.__cause__, ModuleNotFoundError) else error  # gymnasium's wraps it
        raise ConfigError(
            f"env.id={env_cfg.id} needs the module {missing.name}, which cannot be imported here: no module of that "
            "name is installed"
        ) from None
    except gym.error.Error as error:  # not registered: NameNotFound, VersionNotFound, a module that fails to import
        raise ConfigError(
            f"env.id={env_cfg.id} is not a gymnasium env this machine can make "
            f"({_first_line(error)}); a third-party env is named module:Id, "
            "e.g. ale_py:PongNoFrameskip-v4"
        ) from None
    except Exception as error:  # noqa: BLE001 - whatever the env raises, it does not take these kwargs or wrappers
        raise ConfigError(
            f"env.id={env_cfg.id} does not take env={env_cfg.name}'s env.make_kwargs or "
            f"env.wrappers={list(env_cfg.wrappers)} ({_first_line(error)}); {fit_hint(env_cfg.name)}"
        ) from None


def check_env(cfg: DictConfig) -> None:
    """env.id (the preset's, or one given on the command line) must be makeable as configured, observe an
    array that env.network takes, and act like the preset's env (discrete or continuous): its runs are
    filed under the preset's name."""
    observations, actions = env_spaces(cfg.env)
    require(
        isinstance(observations, gym.spaces.Box),
        f"env.id={cfg.env.id} observes {describe(observations)} after env.wrappers={list(cfg.env.wrappers)}, "
        f"not an array a network takes; {fit_hint(cfg.env.name)}",
    )
    preset = default_config(cfg).env
    if preset.id != cfg.env.id:
        preset_actions = env_spaces(preset)[1]
        require(
            type(actions) is type(preset_actions),
            f"env.id={cfg.env.id} has {action_kind(actions)} actions ({describe(actions)}), env={cfg.env.name}'s "
            f"preset is for {action_kind(preset_actions)} ones ({preset.id}: {describe(preset_actions)}); "
            f"{fit_hint(cfg.env.name)}",
        )
    try:
        ActorCritic(observations, actions, cfg.env.network, torch.Generator())
    except (ValueError, RuntimeError) as error:
        raise ConfigError(
            f"env.id={cfg.env.id} observes {describe(observations)} and acts in {describe(actions)}, "
            f"which env.network.kind={cfg.env.network.kind} cannot take ({_first_line(error)}); "
            f"{fit_hint(cfg.env.name)}"
        ) from None
    check_train_env(cfg.env, observations, actions)


def check_train_env(env_cfg: EnvConfig, observations: gym.Space, actions: gym.Space) -> None:
    """env.train_make_kwargs, where set, must make another env of env.id with the evaluation env's spaces
    (`observations`, `actions`): one policy acts in both."""
    given = OmegaConf.to_container(env_cfg.train_make_kwargs, resolve=True)
    if not given:
        return
    key = f"env.train_make_kwargs={given}"
    require(
        OmegaConf.to_container(chosen_make_kwargs(env_cfg, collection=True))
        != OmegaConf.to_container(env_cfg.make_kwargs, resolve=True),
        f"{key} changes nothing of env.make_kwargs: leave it empty (the same env, filed under another run dir)",
    )
    try:
        train_spaces = built_spaces(env_cfg, list(env_cfg.wrappers), collection=True)
    except Exception as error:  # noqa: BLE001 - whatever the env raises, it does not take these kwargs
        raise ConfigError(f"{key}: env.id={env_cfg.id} cannot be made with them ({_first_line(error)})") from None
    require(
        train_spaces == (observations, actions),
        f"{key} change the spaces: the collection env observes {describe(train_spaces[0])} and acts in "
        f"{describe(train_spaces[1])}, the evaluation env (env.make_kwargs) {describe(observations)} and "
        f"{describe(actions)}; one policy must act in both",
    )


def check_action_target(env_cfg: EnvConfig, state: list[float], action: list[float], key: str) -> None:
    """f_action's s* and a* (config keys `<key>.state`, `<key>.action`) must fit the env's spaces."""
    for name, values in (("state", state), ("action", action)):
        # A NaN or inf s* makes f_action, and so every score, NaN: a run that would silently never drop anything.
        require(
            bool(np.isfinite(np.asarray(values, dtype=float)).all()),
            f"{key}.{name}={list(values)} must be finite numbers (NaN or inf found)",
        )
    observations, actions = env_spaces(env_cfg)
    size = int(np.prod(space_shape(observations)))
    require(
        len(state) == size,
        f"{key}.state has {len(state)} entries, env={env_cfg.name} observes "
        f"{size} (shape {space_shape(observations)}, listed flat)",
    )
    if isinstance(actions, gym.spaces.Discrete):
        require(
            len(action) == 1 and float(action[0]).is_integer() and 0 <= action[0] < actions.n,
            f"{key}.action={list(action)} must be one action index in 0..{actions.n - 1} for env={env_cfg.name}",
        )
    else:
        dimensions = int(np.prod(space_shape(actions)))
        require(
            len(action) == dimensions,
            f"{key}.action has {len(action)} entries, env={env_cfg.name}'s actions have {dimensions}",
        )
