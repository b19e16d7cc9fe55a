"""The checks that YAML types cannot express, run before a command writes anything.

The top of the checks, called by the CLI alone (before a command or a sweep's first job runs): each setting's own
check lives with the module that owns the setting, and this module only calls them in order. The schemas
(config/schema.py) reject a misspelt key or a wrong type when Hydra composes the config; `validate` rejects a
key that Hydra's `+key=value` added (config/keys.py), and values that are well-typed but cannot run (p outside
(0, 100], no evaluation episode, an f_action target that does not fit the env, an unknown method), each with
one line naming the key and what is allowed. It sits above the method registry and the envs it consults; the agent that
`env.agent` names (run/agents.py) checks what is its own (targets; the language-model agent its model and data).
"""

from __future__ import annotations

import sys

import torch
from omegaconf import DictConfig, OmegaConf

from rlinfluence import influence
from rlinfluence.choices import require, require_one_of
from rlinfluence.config.engines import check_engine
from rlinfluence.config.keys import check_settings
from rlinfluence.config.paths import check_folder_name, check_writable
from rlinfluence.control.networks import ACTIVATIONS, FEATURE_EXTRACTORS
from rlinfluence.corruption import KINDS, LM_KINDS, plants
from rlinfluence.envs.make import STATE_KEYS, WRAPPERS
from rlinfluence.run.agents import AGENTS, agent_class
from rlinfluence.run.logger import LOGGER_MODES
from rlinfluence.run.tasks import TRAIN, check_task, task_names
from rlinfluence.selection import SELECTION_METHODS, method_granularity
from rlinfluence.update import OPTIMIZERS, SCHEDULES


def _positive(key: str, value: float) -> None:
    require(value > 0, f"{key}={value} must be > 0")


def _at_least(key: str, value: float, low: float, meaning: str) -> None:
    require(value >= low, f"{key}={value} must be >= {low} ({meaning})")


_warned: set[str] = set()


def warn(message: str) -> None:
    """A setting that is ignored, said once a process (a sweep validates each job before it runs it)."""
    if message not in _warned:
        _warned.add(message)
        print(f"rlinfluence: warning: {message}", file=sys.stderr)


def validate(cfg: DictConfig) -> None:
    """Raise ConfigError (one line) on the first value that cannot be run."""
    check_settings(cfg)
    require_one_of("task", cfg.task, task_names())
    # runs_root/experiment_name/env.name/...: the run dirs, and a sweep's folder whatever its task
    require(cfg.runs_root != "", "runs_root='' names no folder: give the one run dirs go under (default: runs)")
    for key in ("experiment_name", "env.name"):
        check_folder_name(key, OmegaConf.select(cfg, key))
    require(
        not OmegaConf.is_missing(cfg.env, "id"),
        f"env={cfg.env.name} needs env.id=<a registered Gymnasium id>, e.g. env.id=CartPole-v1 or "
        "env.id=MountainCar-v0 (a third-party env as module:Id)",
    )
    require_one_of("method.name", cfg.method.name, tuple(SELECTION_METHODS))
    method = SELECTION_METHODS[cfg.method.name]
    method.check_config(cfg)
    method_granularity(cfg)  # every method's: one that takes none refuses it
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
    require(
        cfg.eval.episodes >= 1,
        f"eval.episodes={cfg.eval.episodes} must be >= 1 (the test return is a mean over episodes)",
    )
    _at_least("seed", cfg.seed, 0, "numpy's SeedSequence takes non-negative seeds")
    _at_least("ppo.ent_coef", cfg.ppo.ent_coef, 0, "a negative coefficient would reward a sharper policy")
    _at_least("ppo.vf_coef", cfg.ppo.vf_coef, 0, "a negative coefficient would ascend the value loss")
    require(
        cfg.ppo.max_grad_norm is None or cfg.ppo.max_grad_norm > 0,
        f"ppo.max_grad_norm={cfg.ppo.max_grad_norm} must be > 0, or null (no clipping)",
    )
    require(0 < cfg.ppo.gamma <= 1, f"ppo.gamma={cfg.ppo.gamma} must be in (0, 1]")
    require(0 <= cfg.ppo.gae_lambda <= 1, f"ppo.gae_lambda={cfg.ppo.gae_lambda} must be in [0, 1]")
    require_one_of("optimizer.name", cfg.optimizer.name, OPTIMIZERS)
    require_one_of("ppo.lr_schedule", cfg.ppo.lr_schedule, SCHEDULES)
    require_one_of("ppo.clip_range_schedule", cfg.ppo.clip_range_schedule, SCHEDULES)
    require_one_of("env.agent", cfg.env.agent, AGENTS)
    require(
        cfg.env.agent == "control" or cfg.task in (TRAIN, "figures"),
        f"task={cfg.task} analyses the control envs; env={cfg.env.name} (env.agent={cfg.env.agent}) runs "
        f"task=train or task=figures",
    )
    require(
        not cfg.env.train_make_kwargs or cfg.env.agent == "control",
        f"env.train_make_kwargs gives a gymnasium collection env its own make kwargs; env={cfg.env.name} "
        f"(env.agent={cfg.env.agent}) makes none: leave it empty",
    )
    require_one_of("logger.mode", cfg.logger.mode, LOGGER_MODES)
    require_one_of("env.network.kind", cfg.env.network.kind, FEATURE_EXTRACTORS)
    require_one_of("env.network.activation", cfg.env.network.activation, ACTIVATIONS)
    _positive("env.network.features_dim", cfg.env.network.features_dim)
    for key in ("env.network.pi", "env.network.vf"):
        require(
            all(width > 0 for width in OmegaConf.select(cfg, key)),
            f"{key}={list(OmegaConf.select(cfg, key))} must list layer widths > 0",
        )
    for wrapper in cfg.env.wrappers:
        require_one_of("env.wrappers", wrapper, WRAPPERS)
    require(
        "atari" not in cfg.env.wrappers or cfg.env.atari is not None,
        "env.wrappers has atari, whose settings env.atari are unset (conf/env/pong.yaml sets them)",
    )
    if cfg.env.state_key is not None:
        require_one_of("env.state_key", cfg.env.state_key, STATE_KEYS)
    require_one_of("influence.backend", cfg.influence.backend, influence.BACKENDS)
    require_one_of("influence.normalization", cfg.influence.normalization, influence.NORMALIZATIONS)
    require_one_of("influence.preconditioner", cfg.influence.preconditioner, influence.PRECONDITIONERS)
    require_one_of("influence.checkpoints", cfg.influence.checkpoints, influence.CHECKPOINTS)
    require(
        cfg.influence.preconditioner != "adam" or cfg.optimizer.name == "adam",
        "influence.preconditioner=adam needs optimizer=adam (it reads Adam's state), "
        f"got optimizer={cfg.optimizer.name}",
    )
    check_corruption(cfg)
    require(
        cfg.device == "cpu" or (cfg.device.startswith("cuda") and torch.cuda.is_available()),
        f"device={cfg.device!r} is not available here (cpu{', cuda' if torch.cuda.is_available() else ''})",
    )
    agent_class(cfg.env.agent).check_config(cfg)  # the env, targets, models and data it can run with
    check_engine(cfg)
    if cfg.task == TRAIN:
        check_writable("runs_root", cfg.runs_root)
    check_task(cfg)


def check_corruption(cfg: DictConfig) -> None:
    """corruption.*: a share of each round's records in [0, 1), planted in a way the agent can plant."""
    fraction, kind = cfg.corruption.fraction, cfg.corruption.kind
    require(
        0 <= fraction < 1,
        f"corruption.fraction={fraction} must be in [0, 1) (the share of each round's records planted)",
    )
    require_one_of("corruption.kind", kind, KINDS)
    require(
        not plants(fraction) or cfg.env.agent == "control" or kind in LM_KINDS,
        f"corruption.kind={kind!r} is not one of: {', '.join(LM_KINDS)} (what env.agent={cfg.env.agent} plants)",
    )
