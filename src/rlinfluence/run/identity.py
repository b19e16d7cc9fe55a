"""A run's identity: every setting its results depend on (`result_settings`), the ones that differ from its
env's, optimizer's and method's presets (`non_default_settings`, hashed into the run dir's name by
`config_hash`), and `identity.json`, which a rerun checks before it resumes or skips a run
(`check_identity`; a key added to conf/ since the run was made counts at its default: `settings_as_now`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from rlinfluence.config.compose import composed, preset_groups, search_path
from rlinfluence.envs.ids import simulator_id
from rlinfluence.run.checkpoint import RESTART, RESULTS, RunDirError, unreadable, write_json
from rlinfluence.selection import SELECTION_METHODS

IDENTITY = "identity.json"

# The switches between our protocol and the authors' (conf/protocol/): key, clean value, short name.
PROTOCOL_SWITCHES = (
    ("influence.normalization", "buffer", "chunknorm"),
    ("ppo.drop_last_minibatch", False, "droplast"),
    ("collection.abandon_unfinished", False, "abandon"),
    ("collection.repeat_starts", False, "samestarts"),
    ("collection.repeat_action_noise", False, "samenoise"),
)
CLEAN, PAPER = "clean", "paper"

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
    "seeds",  # engine=stacked: which seeds share a process does not change any seed's numbers (batch invariance)
)
# Compared elsewhere: keys that only feed an interpolation (env.p -> method.p, env.lr -> optimizer.lr,
# env.eval_episodes -> eval.episodes), and the method's name, p, variant and granularity, which its tag in
# the path names. The method's other settings (td_error's alpha) are hashed relative to the method's preset; the
# method.* keys a method does not read are not part of its runs (`_unread_method_keys`).
COMPARED_ELSEWHERE = (
    "env.p",
    "env.lr",
    "env.eval_episodes",
    "method.name",
    "method.p",
    "method.variant",
    "method.granularity",
)
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


@functools.cache
def _settings_of(path: str, overrides: tuple[str, ...]) -> dict[str, Any]:
    return result_settings(composed(path, overrides))


def default_settings(cfg: DictConfig) -> dict[str, Any]:
    """The result settings of the run's presets (config/compose.py's `default_config`): what the hash is
    taken relative to."""
    return _settings_of(search_path(), preset_groups(cfg))


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


def identity(cfg: DictConfig) -> dict[str, Any]:
    changed = non_default_settings(cfg)
    return {"config_hash": digest(changed), "non_default": changed, "settings": result_settings(cfg)}


def write_identity(path: Path, cfg: DictConfig) -> None:
    write_json(path / IDENTITY, identity(cfg))


def settings_as_now(stored: dict[str, Any], cfg: DictConfig) -> dict[str, Any]:
    """A run's stored identity settings, read with the current keys: a key the run predates counts as having
    its current default for the run's env, optimizer and method (`default_settings`).

    Sound because a new result-affecting key must default to the behaviour from before it existed;
    so adding a key leaves every earlier run resumable, and only a command that sets it otherwise is
    another run. The converse is not filled in: a stored key that conf/ no longer has stays, unmatched,
    since whether the current code still does what its value said is unknown. (The rule cannot see a new
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
