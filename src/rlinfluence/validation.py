"""The checks that YAML types cannot express, run before a command writes anything.

The schemas (config.py) reject a misspelt key or a wrong type when Hydra composes the config;
`validate` rejects values that are well-typed but cannot run (p outside (0, 100], no evaluation
episode, an f_action target that does not fit the env, an unknown method), each with one line naming
the key and what is allowed. It sits above the method registry and the envs it consults; the agent that
`env.agent` names (agents.py) checks what is its own (targets; the language-model agent its model and data).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from omegaconf import DictConfig

from rlinfluence.agents import AGENTS, agent_class
from rlinfluence.config import ConfigError
from rlinfluence.envs import make_env
from rlinfluence.selection import SELECTION_METHODS
from rlinfluence.tasks import TRAIN, task_names

OPTIMIZERS = ("sgd", "adam")
LOGGER_MODES = ("offline", "online", "disabled")
NETWORKS = ("mlp", "cnn", "nature_cnn")
INFLUENCE_BACKENDS = ("jvp", "reference")
INFLUENCE_NORMALIZATIONS = ("buffer", "chunk")
INFLUENCE_PRECONDITIONERS = ("none", "adam")
INFLUENCE_CHECKPOINTS = ("round_start", "every_step")
SCHEDULES = ("constant", "linear")


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


def require_one_of(key: str, value: Any, allowed: tuple[str, ...]) -> None:
    _require(value in allowed, f"{key}={value!r} is not one of: {', '.join(allowed)}")


def _positive(key: str, value: float) -> None:
    _require(value > 0, f"{key}={value} must be > 0")


def validate(cfg: DictConfig) -> None:
    """Raise ConfigError (one line) on the first value that cannot be run."""
    require_one_of("task", cfg.task, task_names())
    require_one_of("method.name", cfg.method.name, tuple(SELECTION_METHODS))
    SELECTION_METHODS[cfg.method.name].check_config(cfg)
    for key in ("env.n_steps", "env.rounds", "env.n_envs", "ppo.batch_size", "ppo.n_epochs", "eval.every",
                "eval.n_parallel", "optimizer.lr", "ppo.clip_range", "influence.chunk_size"):
        _positive(key, cfg[key.split(".")[0]][key.split(".")[1]])
    _require(cfg.eval.episodes >= 1,
             f"eval.episodes={cfg.eval.episodes} must be >= 1 (the test return is a mean over episodes)")
    _require(0 < cfg.ppo.gamma <= 1, f"ppo.gamma={cfg.ppo.gamma} must be in (0, 1]")
    _require(0 <= cfg.ppo.gae_lambda <= 1, f"ppo.gae_lambda={cfg.ppo.gae_lambda} must be in [0, 1]")
    require_one_of("optimizer.name", cfg.optimizer.name, OPTIMIZERS)
    require_one_of("ppo.lr_schedule", cfg.ppo.lr_schedule, SCHEDULES)
    require_one_of("ppo.clip_range_schedule", cfg.ppo.clip_range_schedule, SCHEDULES)
    require_one_of("env.agent", cfg.env.agent, tuple(AGENTS))
    _require(cfg.env.agent == "control" or cfg.task in (TRAIN, "figures"),
             f"task={cfg.task} analyses the control envs; env={cfg.env.name} (env.agent={cfg.env.agent}) runs "
             f"task=train or task=figures")
    agent_class(cfg.env.agent).check_config(cfg)  # the targets, models and data it can run with
    require_one_of("logger.mode", cfg.logger.mode, LOGGER_MODES)
    require_one_of("env.network.kind", cfg.env.network.kind, NETWORKS)
    require_one_of("influence.backend", cfg.influence.backend, INFLUENCE_BACKENDS)
    require_one_of("influence.normalization", cfg.influence.normalization, INFLUENCE_NORMALIZATIONS)
    require_one_of("influence.preconditioner", cfg.influence.preconditioner, INFLUENCE_PRECONDITIONERS)
    require_one_of("influence.checkpoints", cfg.influence.checkpoints, INFLUENCE_CHECKPOINTS)
    _require(cfg.influence.preconditioner != "adam" or cfg.optimizer.name == "adam",
             f"influence.preconditioner=adam needs optimizer=adam (it reads Adam's state), got optimizer={cfg.optimizer.name}")
    _require(cfg.device == "cpu" or (cfg.device.startswith("cuda") and torch.cuda.is_available()),
             f"device={cfg.device!r} is not available here (cpu{', cuda' if torch.cuda.is_available() else ''})")


def check_action_target(env_cfg: DictConfig, state: list[float], action: list[float], key: str) -> None:
    """f_action's s* and a* (config keys `<key>.state`, `<key>.action`) must fit the env's spaces: the
    env is built (not stepped) to read them."""
    env = make_env(env_cfg)
    try:
        observations, actions = env.observation_space, env.action_space
    finally:
        env.close()
    size = int(np.prod(observations.shape))
    _require(len(state) == size, f"{key}.state has {len(state)} entries, env={env_cfg.name} observes "
                                 f"{size} (shape {tuple(observations.shape)}, listed flat)")
    if isinstance(actions, gym.spaces.Discrete):
        _require(len(action) == 1 and float(action[0]).is_integer() and 0 <= action[0] < actions.n,
                 f"{key}.action={list(action)} must be one action index in 0..{actions.n - 1} for env={env_cfg.name}")
    else:
        dimensions = int(np.prod(actions.shape))
        _require(len(action) == dimensions,
                 f"{key}.action has {len(action)} entries, env={env_cfg.name}'s actions have {dimensions}")
