"""Typed config schemas (Hydra ConfigStore) and the checks that YAML types cannot express.

The schemas make a misspelt key or a wrong type fail when Hydra composes the config; `validate`
catches values that are well-typed but meaningless (p outside (0, 100], a negative budget, an
unknown method), each with one line naming the key and what is allowed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import torch
from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig


class ConfigError(ValueError):
    """A config value that composes but cannot be run; the message is one line naming the key."""


@dataclass
class NetworkConfig:
    kind: str = "mlp"  # mlp | cnn | nature_cnn
    pi: list[int] = field(default_factory=lambda: [64, 64])
    vf: list[int] = field(default_factory=lambda: [64, 64])
    activation: str = "tanh"
    features_dim: int = 64  # output width of a CNN feature extractor (unused by mlp)


@dataclass
class LearningRates:
    """The env's learning rate for each optimizer (the paper tuned them per env)."""

    sgd: float = 5e-3
    adam: float = 1e-3


@dataclass
class EnvConfig:
    name: str = MISSING
    id: str = MISSING
    make_kwargs: dict[str, Any] = field(default_factory=dict)
    wrappers: list[str] = field(default_factory=list)
    n_envs: int = 1
    n_steps: int = 2048  # records per env per round; a round's buffer holds n_envs * n_steps
    rounds: int = 50
    p: float = 50.0  # the paper's IIF p for this env (method.p defaults to it)
    eval_episodes: int = 1000  # the paper's evaluation episodes per round
    network: NetworkConfig = field(default_factory=NetworkConfig)
    lr: LearningRates = field(default_factory=LearningRates)
    # A name in envs.STATE_KEYS for envs with a small discrete state (FrozenLake, MiniGrid): the
    # collector then stores each record's state id, which Monte-Carlo advantages group by.
    state_key: Optional[str] = None


@dataclass
class MethodConfig:
    name: str = "ppo"
    p: Optional[float] = None  # percent of the negative-influence records to drop
    variant: Optional[str] = None  # a method's sub-rule, e.g. advantage: h1 | h2


@dataclass
class OptimizerConfig:
    name: str = "sgd"
    lr: float = 5e-3
    eps: float = 1e-5  # Adam only (SB3's value)


@dataclass
class TargetConfig:
    name: str = "return"  # return | action
    state: Optional[list[float]] = None  # f_action: the state s* (one-hot/flat observation)
    action: Optional[list[float]] = None  # f_action: the action a* (one entry for discrete actions)


@dataclass
class PPOConfig:
    batch_size: int = 64
    n_epochs: int = 10
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip_range: float = 0.2
    ent_coef: float = 0.0
    vf_coef: float = 0.5
    # The authors' code disabled clipping despite listing 0.5; both arms use the same value.
    max_grad_norm: Optional[float] = None
    normalize_advantage: bool = True
    # Skip each epoch's last, smaller minibatch (the authors' filtered training does; SB3 keeps it).
    drop_last_minibatch: bool = False


@dataclass
class EvalConfig:
    episodes: int = 1000
    every: int = 1  # evaluate every `every` rounds (and always the last round)
    n_parallel: int = 32  # episodes run side by side with batched inference


@dataclass
class InfluenceConfig:
    backend: str = "jvp"  # jvp | reference (per-record autograd loop; slow, for checking)
    chunk_size: int = 4096  # records per forward-mode pass (bounds memory on image envs)
    # How the per-record loss normalises Â: over the whole buffer, or (the authors' code) within each
    # ppo.batch_size chunk of a seeded random partition of the buffer, like one epoch of SB3 minibatches.
    normalization: str = "buffer"  # buffer | chunk


@dataclass
class CollectionConfig:
    """How a round's rollout continues from the previous one. Clean (all false): one continuous run, as
    standard PPO does. The authors' IIF started every round in a fresh process seeded with the run
    seed; each part of that is a switch here so it can be measured alone (paper-spec §3.1, §9)."""

    abandon_unfinished: bool = False  # reset every env at a round's start: the episode in progress is lost
    repeat_starts: bool = False  # every round replays the same sequence of seeded episode starts
    repeat_action_noise: bool = False  # every round reuses the same action-sampling noise


@dataclass
class LoggerConfig:
    mode: str = "offline"  # offline | online | disabled
    project: str = "rlinfluence"
    entity: Optional[str] = None
    group: Optional[str] = None
    tags: list[str] = field(default_factory=list)
    init_timeout: float = 90.0  # seconds W&B may take to start (online without network) before it is skipped


@dataclass
class FiguresConfig:
    data_dir: str = "paper_figures/data"
    out_dir: str = "paper_figures"
    runs_root: Optional[str] = None  # refresh data_dir from these run dirs first


@dataclass
class Config:
    task: str = "train"  # train | figures
    experiment_name: str = "default"  # set by the +experiment=<name> overlays; names the runs/ subfolder
    seed: int = 0
    runs_root: str = "runs"
    force: bool = False  # rerun a finished run from scratch
    torch_threads: int = 1  # small nets run fastest single-threaded
    device: str = "cpu"  # cpu | cuda (cuda pays off for the image envs; everything runs on cpu)
    progress: bool = True
    env: EnvConfig = field(default_factory=EnvConfig)
    method: MethodConfig = field(default_factory=MethodConfig)
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    target: TargetConfig = field(default_factory=TargetConfig)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    collection: CollectionConfig = field(default_factory=CollectionConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    influence: InfluenceConfig = field(default_factory=InfluenceConfig)
    logger: LoggerConfig = field(default_factory=LoggerConfig)
    figures: FiguresConfig = field(default_factory=FiguresConfig)


def register_schemas() -> None:
    """The typed root config; every group file is merged into it, so its types and keys are checked."""
    ConfigStore.instance().store(name="config_schema", node=Config)


TASKS = ("train", "figures")
OPTIMIZERS = ("sgd", "adam")
TARGETS = ("return", "action")
LOGGER_MODES = ("offline", "online", "disabled")
NETWORKS = ("mlp", "cnn", "nature_cnn")
INFLUENCE_BACKENDS = ("jvp", "reference")
INFLUENCE_NORMALIZATIONS = ("buffer", "chunk")


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


def _one_of(key: str, value: Any, allowed: tuple[str, ...]) -> None:
    _require(value in allowed, f"{key}={value!r} is not one of: {', '.join(allowed)}")


def _positive(key: str, value: float) -> None:
    _require(value > 0, f"{key}={value} must be > 0")


def validate(cfg: DictConfig) -> None:
    """Raise ConfigError (one line) on the first value that cannot be run."""
    from rlinfluence.selection import SELECTION_METHODS

    _one_of("task", cfg.task, TASKS)
    _one_of("method.name", cfg.method.name, tuple(SELECTION_METHODS))
    SELECTION_METHODS[cfg.method.name].check_config(cfg)
    for key in ("env.n_steps", "env.rounds", "env.n_envs", "ppo.batch_size", "ppo.n_epochs", "eval.every",
                "eval.n_parallel", "optimizer.lr", "ppo.clip_range", "influence.chunk_size"):
        _positive(key, cfg[key.split(".")[0]][key.split(".")[1]])
    _require(cfg.eval.episodes >= 0, f"eval.episodes={cfg.eval.episodes} must be >= 0")
    _require(0 < cfg.ppo.gamma <= 1, f"ppo.gamma={cfg.ppo.gamma} must be in (0, 1]")
    _require(0 <= cfg.ppo.gae_lambda <= 1, f"ppo.gae_lambda={cfg.ppo.gae_lambda} must be in [0, 1]")
    _one_of("optimizer.name", cfg.optimizer.name, OPTIMIZERS)
    _one_of("target.name", cfg.target.name, TARGETS)
    if cfg.target.name == "action":
        _require(cfg.target.state is not None and cfg.target.action is not None,
                 "target=action needs target.state and target.action (the s* and a* of f_action)")
    _one_of("logger.mode", cfg.logger.mode, LOGGER_MODES)
    _one_of("env.network.kind", cfg.env.network.kind, NETWORKS)
    _one_of("influence.backend", cfg.influence.backend, INFLUENCE_BACKENDS)
    _one_of("influence.normalization", cfg.influence.normalization, INFLUENCE_NORMALIZATIONS)
    _require(cfg.device == "cpu" or (cfg.device.startswith("cuda") and torch.cuda.is_available()),
             f"device={cfg.device!r} is not available here (cpu{', cuda' if torch.cuda.is_available() else ''})")


def check_p(cfg: DictConfig) -> None:
    """Methods that drop a share of the negative records need p in (0, 100]."""
    p = cfg.method.p
    _require(p is not None and 0 < p <= 100,
             f"method.p={p} must be in (0, 100] (percent of negative-influence records to drop)")
