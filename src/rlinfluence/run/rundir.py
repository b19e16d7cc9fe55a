"""A run's directory is its whole configuration: the same settings always map to the same folder,
different settings never do.

    runs/<experiment_name>/<env>/<optimizer>/<method_tag>[-<protocol>][-<hash>]/seed<seed>/

The readable part names the paper's settings. <env> is the preset's name (env=gym: `gym-<env.id>`).
<protocol> is absent for the clean protocol, `paper` for the authors' (protocol=paper), else the names of
the switches set. <hash> is absent when every other result-affecting setting has the default of the run's
env (env=gym: with its env.id), optimizer and method; else it is 6 hex digits of the settings that differ.
`identity.json` in the run dir holds all the result-affecting settings (run/identity.py), so a rerun resumes or
skips the run only when they are equal.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import quote, unquote

from omegaconf import DictConfig, OmegaConf

from rlinfluence.choices import ConfigError
from rlinfluence.config.compose import ANY_ENV
from rlinfluence.run.checkpoint import DONE
from rlinfluence.run.identity import CLEAN, PAPER, PROTOCOL_SWITCHES, config_hash
from rlinfluence.selection import SELECTION_METHODS

# ----------------------------------------------------------------------------- the readable path


def method_tag(method: DictConfig) -> str:
    method_class = SELECTION_METHODS.get(method.name)
    return method_class.tag(method) if method_class else str(method.name)


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


def env_folder(cfg: DictConfig) -> str:
    """The run dir's env part: the preset's name; for env=gym, `gym-` and env.id percent-encoded, so that it
    is one folder name (an id may hold `/` or `:`) and two ids never share it."""
    if cfg.env.name != ANY_ENV:
        return str(cfg.env.name)
    return f"{ANY_ENV}-{quote(cfg.env.id, safe='')}"


def any_env_id(folder: str) -> str | None:
    """The env.id an env=gym run's env folder encodes (`env_folder`'s inverse); None for an env preset's folder."""
    prefix = f"{ANY_ENV}-"
    return unquote(folder.removeprefix(prefix)) if folder.startswith(prefix) else None


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
