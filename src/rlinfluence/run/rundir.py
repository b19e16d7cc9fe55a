"""A run's directory is its whole configuration: the same settings always map to the same folder,
different settings never do.

    runs/<experiment_name>/<env>/<optimizer>/<method_tag>[-<protocol>][-<hash>]/seed<seed>/

The readable part names the paper's settings. <env> is the preset's name (env=gym: `gym-<env.id>`).
<protocol> is absent for the clean protocol, `paper` for the authors' (protocol=paper), else the names of
the switches set. <hash> is absent when every other result-affecting setting has the default of the run's
env (env=gym: with its env.id), optimizer and method; else it is 6 hex digits of the settings that differ.
`identity.json` in the run dir holds all the result-affecting settings, so a rerun resumes or skips the run
only when they are equal (a key added to conf/ since the run was made counts at its default: `settings_as_now`).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig, OmegaConf

from rlinfluence.config.choices import ConfigError
from rlinfluence.config.paths import CONFIG_DIR
from rlinfluence.envs.ids import simulator_id
from rlinfluence.run.checkpoint import (
    CHECKPOINT,
    CORRUPTION,
    METRICS,
    RESTART,
    SUMMARY,
    RunDirError,
    unreadable,
    write_json,
)
from rlinfluence.selection import SELECTION_METHODS

DONE = "DONE"
IDENTITY = "identity.json"
RESULTS = (CHECKPOINT, METRICS, CORRUPTION, SUMMARY, DONE)  # what makes a run dir more than an empty folder

# ----------------------------------------------------------------------------- the readable path


def method_tag(method: DictConfig) -> str:
    method_class = SELECTION_METHODS.get(method.name)
    return method_class.tag(method) if method_class else str(method.name)


# The switches between our protocol and the authors' (conf/protocol/): key, clean value, short name.
PROTOCOL_SWITCHES = (
    ("influence.normalization", "buffer", "chunknorm"),
    ("ppo.drop_last_minibatch", False, "droplast"),
    ("collection.abandon_unfinished", False, "abandon"),
    ("collection.repeat_starts", False, "samestarts"),
    ("collection.repeat_action_noise", False, "samenoise"),
)
CLEAN, PAPER = "clean", "paper"


def protocol_tag(cfg: DictConfig) -> str:
    """`clean`, `paper`, or the short names of the switches that differ from the clean protocol."""
    changed = [name for key, clean, name in PROTOCOL_SWITCHES if OmegaConf.select(cfg, key) != clean]
    if not changed:
        return CLEAN
    return PAPER if len(changed) == len(PROTOCOL_SWITCHES) else "-".join(changed)


def run_leaf(cfg: DictConfig) -> str:
    """The run's folder name above seed<k>: the method's tag, the protocol's unless it is clean, and the
    hash of the other non-default settings when there are any."""
    protocol, changed = protocol_tag(cfg), config_hash(cfg)
    return "-".join(
        [method_tag(cfg.method)] + ([protocol] if protocol != CLEAN else []) + ([changed] if changed else [])
    )


ANY_ENV = "gym"  # env=gym (conf/env/gym.yaml): any registered env.id, which its runs are filed under


def env_folder(cfg: DictConfig) -> str:
    """The run dir's env part: the preset's name; for env=gym, `gym-` and env.id percent-encoded, so that it
    is one folder name (an id may hold `/` or `:`) and two ids never share it."""
    if cfg.env.name != ANY_ENV:
        return str(cfg.env.name)
    return f"{ANY_ENV}-{quote(cfg.env.id, safe='')}"


def relative_run_dir(cfg: DictConfig) -> Path:
    return Path(env_folder(cfg)) / cfg.optimizer.name / run_leaf(cfg) / f"seed{cfg.seed}"


def run_dir(cfg: DictConfig) -> Path:
    return Path(cfg.runs_root) / cfg.experiment_name / relative_run_dir(cfg)


def is_done(path: Path) -> bool:
    return (path / DONE).exists()


def create_run_dir(path: Path, runs_root: str) -> None:
    """A command's first write. A runs_root that cannot take the run is a config error; the failed
    mkdir has created nothing (whatever it could not create, it could not create below either)."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ConfigError(f"runs_root={runs_root} is not writable: {error.strerror}: {error.filename}") from None
    if not os.access(path, os.W_OK):
        raise ConfigError(f"runs_root={runs_root} is not writable: {path} is read-only")


# ----------------------------------------------------------------------------- the settings behind the hash

# Top-level keys that cannot change a run's results: where it is stored, how it is shown and mirrored,
# whether per-round snapshots are kept, what the analyses do with them.
# (device and torch_threads are result-affecting: CPU and GPU kernels, and kernels on different thread
# counts, need not give bit-identical numbers.)
NOT_RESULT_AFFECTING = (
    "hydra",
    "task",
    "experiment_name",
    "runs_root",
    "force",
    "progress",
    "logger",
    "figures",
    "checkpoint",
    "analysis",
    "replay",
)
# Compared elsewhere: keys that only feed an interpolation (env.p -> method.p, env.lr -> optimizer.lr,
# env.eval_episodes -> eval.episodes), and the method's name, p and variant, which its tag in the path
# names. The method's other settings (td_error's alpha) are hashed relative to the method's preset; the
# method.* keys a method does not read are not part of its runs (`_unread_method_keys`).
COMPARED_ELSEWHERE = ("env.p", "env.lr", "env.eval_episodes", "method.name", "method.p", "method.variant")
# Result-affecting, but named by the readable path already.
IN_PATH = ("seed", *(key for key, _, _ in PROTOCOL_SWITCHES))
UNSET = "<unset>"  # a key the config lacks (deleted with ~key, or added with +key on the other side)


def _under(key: str, prefixes: tuple[str, ...]) -> bool:
    return any(key == prefix or key.startswith(prefix + ".") for prefix in prefixes)


def flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(tree, dict):
        return {prefix: tree}
    return {
        flat_key: value
        for key, subtree in tree.items()
        for flat_key, value in flatten(subtree, f"{prefix}.{key}" if prefix else str(key)).items()
    }


def _unread_method_keys(cfg: DictConfig) -> tuple[str, ...]:
    """The method.* keys the run's method does not read (validation warns of one that is set)."""
    method_class = SELECTION_METHODS.get(OmegaConf.select(cfg, "method.name"))
    read = method_class.settings if method_class else ()
    return tuple(f"method.{key}" for key in cfg.get("method") or () if key != "name" and key not in read)


def result_settings(cfg: DictConfig) -> dict[str, Any]:
    """Every setting the run's results depend on, resolved, as {dotted key: value} sorted by key."""
    # Node by node, so that the `hydra` node of a full config is never resolved.
    tree = {
        key: OmegaConf.to_container(cfg[key], resolve=True) if OmegaConf.is_config(cfg[key]) else cfg[key]
        for key in cfg
        if key not in NOT_RESULT_AFFECTING
    }
    settings, elsewhere = flatten(tree), COMPARED_ELSEWHERE + _unread_method_keys(cfg)
    return {key: settings[key] for key in sorted(settings) if not _under(key, elsewhere)}


@contextlib.contextmanager
def composing() -> Iterator[GlobalHydra]:
    """The Hydra of the app, test or manifest that is composing, or one on the repo's conf/ when none is."""
    hydra = GlobalHydra.instance()
    if hydra.is_initialized():
        yield hydra
        return
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        yield hydra


def compose_config(overrides: list[str]) -> DictConfig:
    """The config `rlinfluence <overrides>` runs with, from the search path `composing` gives."""
    with composing():
        return compose("config", overrides=overrides)


def _search_path() -> str:
    hydra = GlobalHydra.instance().hydra  # None: not initialized
    return str(hydra.config_loader.get_search_path()) if hydra is not None else CONFIG_DIR


# Composed once per search path (the cache key) and overrides: a sweep composes each env/optimizer/method once.


@functools.cache
def _composed(search_path: str, overrides: tuple[str, ...]) -> DictConfig:
    return compose_config(list(overrides))


@functools.cache
def _composed_settings(search_path: str, overrides: tuple[str, ...]) -> dict[str, Any]:
    return result_settings(_composed(search_path, overrides))


def _preset_groups(cfg: DictConfig) -> tuple[str, ...]:
    """The groups whose presets a run's defaults are: its env, optimizer and method (each method.name is
    a conf/method/ option; a config without a method, as the figures' lookups build, has the default's).
    env=gym's preset is taken with the run's env.id, which its run dir names already."""
    method = OmegaConf.select(cfg, "method.name")
    env_id = [f"env.id={cfg.env.id}"] if cfg.env.name == ANY_ENV else []
    return (
        f"env={cfg.env.name}",
        *env_id,
        f"optimizer={cfg.optimizer.name}",
        *([f"method={method}"] if method else []),
    )


def default_config(cfg: DictConfig) -> DictConfig:
    """The config composed from the run's env, optimizer and method alone (no key=value override)."""
    return _composed(_search_path(), _preset_groups(cfg))


def default_settings(cfg: DictConfig) -> dict[str, Any]:
    """The result settings of `default_config`: what the hash is taken relative to."""
    return _composed_settings(_search_path(), _preset_groups(cfg))


def preset(env_name: str) -> DictConfig:
    """The config `rlinfluence env=<env_name>` runs with: the env's preset, its optimizer included."""
    return _composed(_search_path(), (f"env={env_name}",))


def envs_with_state_key() -> list[str]:
    """The `env=` options whose preset sets env.state_key (for error messages)."""
    with composing() as hydra:
        names = hydra.config_loader().get_group_options("env")
    return [name for name in names if preset(name).env.state_key is not None]


def non_default_settings(cfg: DictConfig) -> dict[str, Any]:
    """The result settings that differ from `default_settings` and are not in the readable path."""
    settings, defaults = result_settings(cfg), default_settings(cfg)
    keys = sorted(key for key in settings.keys() | defaults.keys() if not _under(key, IN_PATH))
    return {key: settings.get(key, UNSET) for key in keys if settings.get(key, UNSET) != defaults.get(key, UNSET)}


def digest(changed: dict[str, Any]) -> str | None:
    """6 hex digits of sha256 over the canonical JSON of the changed settings; None when there are none."""
    if not changed:
        return None
    return hashlib.sha256(json.dumps(changed, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:6]


def config_hash(cfg: DictConfig) -> str | None:
    return digest(non_default_settings(cfg))


# ----------------------------------------------------------------------------- identity.json


def identity(cfg: DictConfig) -> dict[str, Any]:
    changed = non_default_settings(cfg)
    return {"config_hash": digest(changed), "non_default": changed, "settings": result_settings(cfg)}


def write_identity(path: Path, cfg: DictConfig) -> None:
    write_json(path / IDENTITY, identity(cfg))


def settings_as_now(stored: dict[str, Any], cfg: DictConfig) -> dict[str, Any]:
    """A run's stored identity settings, read with today's keys: a key the run predates counts as having
    its current default for the run's env, optimizer and method (`default_settings`).

    Sound because a new result-affecting key must default to the behaviour from before it existed;
    so adding a key leaves every earlier run resumable, and only a command that sets it otherwise is
    another run. The converse is not filled in: a stored key that conf/ no longer has stays, unmatched,
    since whether today's code still does what its value said is unknown. (The rule cannot see a new
    key's default moved after older runs were made: moving a default needs force=true on those runs.)
    A stored env id reads as the id of the simulator it ran (envs/ids.py: a library id a preset replaced
    by ours, our modules' ids from before they moved), so that neither switch strands a finished run."""
    stored = dict(stored)
    if "env.id" in stored:
        stored["env.id"] = simulator_id(stored["env.id"])
    return {key: value for key, value in default_settings(cfg).items() if key not in stored} | stored


def check_identity(path: Path, cfg: DictConfig) -> None:
    """Refuse to continue a run made with other settings (a hand-edited conf/ can move a default); keys
    added since the run was made count at their defaults (`settings_as_now`).

    A run dir from before identity.json cannot be checked: it is taken as this command's run, with a
    line saying so (its path was chosen by the paper's settings; refusing would strand every such run)."""
    if not any((path / name).exists() for name in RESULTS):
        return
    if not (path / IDENTITY).exists():
        print(
            f"rlinfluence: {path} predates {IDENTITY}, so its settings cannot be checked; taking it as this "
            f"command's run (force=true restarts it)",
            file=sys.stderr,
        )
        return
    try:
        recorded = dict(json.loads((path / IDENTITY).read_text())["settings"])
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise unreadable(path / IDENTITY, error) from None
    stored, settings = settings_as_now(recorded, cfg), result_settings(cfg)
    differing = sorted(
        key for key in stored.keys() | settings.keys() if stored.get(key, UNSET) != settings.get(key, UNSET)
    )
    if differing:
        key, count = differing[0], len(differing)
        was, now = json.dumps(stored.get(key, UNSET)), json.dumps(settings.get(key, UNSET))
        predates = " (its default: the run predates the key)" if key in stored and key not in recorded else ""
        raise RunDirError(
            f"{path} was made with {key}={was}{predates}, this command has {key}={now} "
            f"({count} setting(s) differ); {RESTART}"
        )
