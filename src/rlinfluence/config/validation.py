"""The checks that YAML types cannot express, run before a command writes anything.

The schemas (config/schema.py) reject a misspelt key or a wrong type when Hydra composes the config;
`validate` rejects values that are well-typed but cannot run (p outside (0, 100], no evaluation
episode, an f_action target that does not fit the env, an unknown method), each with one line naming
the key and what is allowed. It sits above the method registry and the envs it consults; the agent that
`env.agent` names (run/agents.py) checks what is its own (targets; the language-model agent its model and data).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from rlinfluence import influence
from rlinfluence.config.choices import ConfigError, require_one_of
from rlinfluence.config.schema import EnvConfig
from rlinfluence.control.networks import ACTIVATIONS, FEATURE_EXTRACTORS, ActorCritic
from rlinfluence.corruption import KINDS, LM_KINDS
from rlinfluence.envs.make import STATE_KEYS, WRAPPERS, built_spaces, chosen_make_kwargs, space_shape
from rlinfluence.run.agents import AGENTS, agent_class
from rlinfluence.run.logger import LOGGER_MODES
from rlinfluence.run.rundir import ANY_ENV, default_config
from rlinfluence.run.tasks import TRAIN, check_task, task_names
from rlinfluence.selection import SELECTION_METHODS
from rlinfluence.update import OPTIMIZERS, SCHEDULES


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


def _positive(key: str, value: float) -> None:
    _require(value > 0, f"{key}={value} must be > 0")


def _at_least(key: str, value: float, low: float, meaning: str) -> None:
    _require(value >= low, f"{key}={value} must be >= {low} ({meaning})")


_warned: set[str] = set()


def warn(message: str) -> None:
    """A setting that is ignored, said once a process (a sweep validates each job before it runs it)."""
    if message not in _warned:
        _warned.add(message)
        print(f"rlinfluence: warning: {message}", file=sys.stderr)


def check_writable(key: str, path: str | Path) -> None:
    """`path` (a directory, made if missing) can be written: its nearest existing ancestor must be a
    directory in which a directory can be made. Checked before a command writes anything, so it never fails
    half way. The probe makes one and removes it: permission bits miss what root cannot write either
    (/proc, /sys, a read-only mount)."""
    existing = Path(path).absolute()
    while not existing.exists():
        existing = existing.parent
    _require(existing.is_dir(), f"{key}={path} is not writable: {existing} is not a directory")
    _require(os.access(existing, os.W_OK | os.X_OK), f"{key}={path} is not writable: {existing} is read-only")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".rlinfluence-probe-", dir=existing))
    except OSError as error:
        raise ConfigError(
            f"{key}={path} is not writable: {existing} refuses a new directory ({error.strerror})"
        ) from None


def validate(cfg: DictConfig) -> None:
    """Raise ConfigError (one line) on the first value that cannot be run."""
    require_one_of("task", cfg.task, task_names())
    _require(
        not OmegaConf.is_missing(cfg.env, "id"),
        f"env={cfg.env.name} needs env.id=<a registered Gymnasium id>, e.g. env.id=CartPole-v1 or "
        "env.id=MountainCar-v0 (a third-party env as module:Id)",
    )
    require_one_of("method.name", cfg.method.name, tuple(SELECTION_METHODS))
    method = SELECTION_METHODS[cfg.method.name]
    method.check_config(cfg)
    for key, value in cfg.method.items():
        if key != "name" and value is not None and key not in method.settings:
            warn(
                f"method.{key}={value} does not apply to method={cfg.method.name}; ignored (not part of "
                f"the run's identity)"
            )
    for key in (
        "env.n_steps",
        "env.rounds",
        "env.n_envs",
        "ppo.batch_size",
        "ppo.n_epochs",
        "eval.every",
        "eval.n_parallel",
        "optimizer.lr",
        "optimizer.eps",
        "ppo.clip_range",
        "influence.chunk_size",
        "torch_threads",
        "logger.init_timeout",
    ):
        _positive(key, OmegaConf.select(cfg, key))
    _require(
        cfg.eval.episodes >= 1,
        f"eval.episodes={cfg.eval.episodes} must be >= 1 (the test return is a mean over episodes)",
    )
    _at_least("seed", cfg.seed, 0, "numpy's SeedSequence takes non-negative seeds")
    _at_least("ppo.ent_coef", cfg.ppo.ent_coef, 0, "a negative coefficient would reward a sharper policy")
    _at_least("ppo.vf_coef", cfg.ppo.vf_coef, 0, "a negative coefficient would ascend the value loss")
    _require(
        cfg.ppo.max_grad_norm is None or cfg.ppo.max_grad_norm > 0,
        f"ppo.max_grad_norm={cfg.ppo.max_grad_norm} must be > 0, or null (no clipping)",
    )
    _require(0 < cfg.ppo.gamma <= 1, f"ppo.gamma={cfg.ppo.gamma} must be in (0, 1]")
    _require(0 <= cfg.ppo.gae_lambda <= 1, f"ppo.gae_lambda={cfg.ppo.gae_lambda} must be in [0, 1]")
    require_one_of("optimizer.name", cfg.optimizer.name, OPTIMIZERS)
    require_one_of("ppo.lr_schedule", cfg.ppo.lr_schedule, SCHEDULES)
    require_one_of("ppo.clip_range_schedule", cfg.ppo.clip_range_schedule, SCHEDULES)
    require_one_of("env.agent", cfg.env.agent, AGENTS)
    _require(
        cfg.env.agent == "control" or cfg.task in (TRAIN, "figures"),
        f"task={cfg.task} analyses the control envs; env={cfg.env.name} (env.agent={cfg.env.agent}) runs "
        f"task=train or task=figures",
    )
    _require(
        not cfg.env.train_make_kwargs or cfg.env.agent == "control",
        f"env.train_make_kwargs gives a gymnasium collection env its own make kwargs; env={cfg.env.name} "
        f"(env.agent={cfg.env.agent}) makes none: leave it empty",
    )
    require_one_of("logger.mode", cfg.logger.mode, LOGGER_MODES)
    require_one_of("env.network.kind", cfg.env.network.kind, FEATURE_EXTRACTORS)
    require_one_of("env.network.activation", cfg.env.network.activation, ACTIVATIONS)
    _positive("env.network.features_dim", cfg.env.network.features_dim)
    for key in ("env.network.pi", "env.network.vf"):
        _require(
            all(width > 0 for width in OmegaConf.select(cfg, key)),
            f"{key}={list(OmegaConf.select(cfg, key))} must list layer widths > 0",
        )
    for wrapper in cfg.env.wrappers:
        require_one_of("env.wrappers", wrapper, WRAPPERS)
    _require(
        "atari" not in cfg.env.wrappers or cfg.env.atari is not None,
        "env.wrappers has atari, whose settings env.atari are unset (conf/env/pong.yaml sets them)",
    )
    if cfg.env.state_key is not None:
        require_one_of("env.state_key", cfg.env.state_key, STATE_KEYS)
    require_one_of("influence.backend", cfg.influence.backend, influence.BACKENDS)
    require_one_of("influence.normalization", cfg.influence.normalization, influence.NORMALIZATIONS)
    require_one_of("influence.preconditioner", cfg.influence.preconditioner, influence.PRECONDITIONERS)
    require_one_of("influence.checkpoints", cfg.influence.checkpoints, influence.CHECKPOINTS)
    _require(
        cfg.influence.preconditioner != "adam" or cfg.optimizer.name == "adam",
        "influence.preconditioner=adam needs optimizer=adam (it reads Adam's state), "
        f"got optimizer={cfg.optimizer.name}",
    )
    check_corruption(cfg)
    _require(
        cfg.device == "cpu" or (cfg.device.startswith("cuda") and torch.cuda.is_available()),
        f"device={cfg.device!r} is not available here (cpu{', cuda' if torch.cuda.is_available() else ''})",
    )
    agent_class(cfg.env.agent).check_config(cfg)  # the env, targets, models and data it can run with
    if cfg.task == TRAIN:
        check_writable("runs_root", cfg.runs_root)
    check_task(cfg)


def check_corruption(cfg: DictConfig) -> None:
    """corruption.*: a share of each round's records in [0, 1), planted in a way the agent can plant."""
    fraction, kind = cfg.corruption.fraction, cfg.corruption.kind
    _require(
        0 <= fraction < 1,
        f"corruption.fraction={fraction} must be in [0, 1) (the share of each round's records planted)",
    )
    require_one_of("corruption.kind", kind, KINDS)
    _require(
        not fraction or cfg.env.agent == "control" or kind in LM_KINDS,
        f"corruption.kind={kind!r} is not one of: {', '.join(LM_KINDS)} (what env.agent={cfg.env.agent} plants)",
    )


# ----------------------------------------------------------------------------- the env and its preset

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
    _require(
        isinstance(observations, gym.spaces.Box),
        f"env.id={cfg.env.id} observes {describe(observations)} after env.wrappers={list(cfg.env.wrappers)}, "
        f"not an array a network takes; {fit_hint(cfg.env.name)}",
    )
    preset = default_config(cfg).env
    if preset.id != cfg.env.id:
        preset_actions = env_spaces(preset)[1]
        _require(
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
    _require(
        OmegaConf.to_container(chosen_make_kwargs(env_cfg, collection=True))
        != OmegaConf.to_container(env_cfg.make_kwargs, resolve=True),
        f"{key} changes nothing of env.make_kwargs: leave it empty (the same env, filed under another run dir)",
    )
    try:
        train_spaces = built_spaces(env_cfg, list(env_cfg.wrappers), collection=True)
    except Exception as error:  # noqa: BLE001 - whatever the env raises, it does not take these kwargs
        raise ConfigError(f"{key}: env.id={env_cfg.id} cannot be made with them ({_first_line(error)})") from None
    _require(
        train_spaces == (observations, actions),
        f"{key} change the spaces: the collection env observes {describe(train_spaces[0])} and acts in "
        f"{describe(train_spaces[1])}, the evaluation env (env.make_kwargs) {describe(observations)} and "
        f"{describe(actions)}; one policy must act in both",
    )


def check_action_target(env_cfg: EnvConfig, state: list[float], action: list[float], key: str) -> None:
    """f_action's s* and a* (config keys `<key>.state`, `<key>.action`) must fit the env's spaces."""
    observations, actions = env_spaces(env_cfg)
    size = int(np.prod(space_shape(observations)))
    _require(
        len(state) == size,
        f"{key}.state has {len(state)} entries, env={env_cfg.name} observes "
        f"{size} (shape {space_shape(observations)}, listed flat)",
    )
    if isinstance(actions, gym.spaces.Discrete):
        _require(
            len(action) == 1 and float(action[0]).is_integer() and 0 <= action[0] < actions.n,
            f"{key}.action={list(action)} must be one action index in 0..{actions.n - 1} for env={env_cfg.name}",
        )
    else:
        dimensions = int(np.prod(space_shape(actions)))
        _require(
            len(action) == dimensions,
            f"{key}.action has {len(action)} entries, env={env_cfg.name}'s actions have {dimensions}",
        )
