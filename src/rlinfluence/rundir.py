"""Deterministic run directories: the same overrides always map to the same folder.

runs/<experiment_name>/<env>/<optimizer>/<method_tag>[-<protocol>]/seed<seed>/ — so a rerun resumes or
skips, and figure scripts find runs without a database. <protocol> is absent for the clean protocol,
`paper` for the authors' (protocol=paper), else the names of the switches set. Hydra's run and sweep
dirs use the `run_leaf` resolver registered here.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf

DONE = "DONE"


def method_tag(method: DictConfig) -> str:
    from rlinfluence.selection import SELECTION_METHODS

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
    """The run's folder name above seed<k>: the method's tag, then the protocol's unless it is clean."""
    protocol = protocol_tag(cfg)
    return method_tag(cfg.method) + ("" if protocol == CLEAN else f"-{protocol}")


def relative_run_dir(cfg: DictConfig) -> Path:
    return Path(cfg.env.name) / cfg.optimizer.name / run_leaf(cfg) / f"seed{cfg.seed}"


def run_dir(cfg: DictConfig) -> Path:
    return Path(cfg.runs_root) / cfg.experiment_name / relative_run_dir(cfg)


def is_done(path: Path) -> bool:
    return (path / DONE).exists()


def register_resolvers() -> None:
    if not OmegaConf.has_resolver("run_leaf"):
        # _root_: the whole config, so the template needs no list of the keys the name depends on.
        OmegaConf.register_new_resolver("run_leaf", lambda *, _root_: run_leaf(_root_))
