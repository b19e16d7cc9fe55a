"""The agents the round loop drives, chosen by `env.agent` (what round.py asks of one is its `Agent`).

An agent owns a run's model, optimizer and RNGs and does what is its own in each stage of a round; the
loop (round.py) runs the stages in order, times them, does the selection (selection.py serves every
agent) and writes the metrics row, with the fields every agent shares and NaN for what a round did not
measure. Imported lazily: the language-model agent needs transformers, which a control run never loads.
"""

from __future__ import annotations

import importlib
from typing import Any

from omegaconf import DictConfig

from rlinfluence.choices import ConfigError
from rlinfluence.round import Agent

AGENTS = {"control": "rlinfluence.control.trainer:Trainer", "lm": "rlinfluence.lm.trainer:LMTrainer"}
EXTRAS = {"lm": "rlhf"}  # the optional dependencies (pyproject.toml's extra) an agent's libraries come with


def agent_class(name: str) -> type[Agent[Any, Any]]:
    """The agent's class; refused in one line naming the extra to install when its libraries are missing."""
    module, cls = AGENTS[name].split(":")
    try:
        return getattr(importlib.import_module(module), cls)
    except ModuleNotFoundError as missing:
        if name not in EXTRAS or (missing.name or "rlinfluence").split(".")[0] == "rlinfluence":
            raise  # a module of ours missing is a broken install, not a missing extra
        extra = EXTRAS[name]
        raise ConfigError(
            f"env.agent={name} needs the {extra} extra, which is not installed here ({missing.name} is missing): "
            f"pip install 'rlinfluence[{extra}]' (in a checkout: pip install -e '.[{extra}]')"
        ) from None


def make_agent(cfg: DictConfig) -> Agent[Any, Any]:
    return agent_class(cfg.env.agent)(cfg)
