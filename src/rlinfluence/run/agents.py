"""The agents the round loop drives, chosen by `env.agent` (what round.py asks of one is its `Agent`).

An agent owns a run's model, optimizer and RNGs; its `Seeds` (the control engine's stack, or the language
models' one by one) take each stage of a round for all the runs of a process; the loop (round.py) runs the
stages in order, times them, does the selection (selection.py serves every agent) and writes the metrics row,
with the fields every agent shares and NaN for what a round did not measure. Imported lazily: the language-model
agent needs transformers, which a control run never loads.
"""

from __future__ import annotations

import importlib
from typing import Any

from omegaconf import DictConfig

from rlinfluence.choices import ConfigError
from rlinfluence.round import Agent, Seeds

AGENTS = {"control": "rlinfluence.control.trainer:Trainer", "lm": "rlinfluence.lm.trainer:LMTrainer"}
# How the runs of a process take each stage of a round (round.Seeds): the control engine's stack trains them all at
# once; the language models train one by one.
SEEDS = {"control": "rlinfluence.control.engine:Stack", "lm": "rlinfluence.round:OneByOne"}
EXTRAS = {"lm": "rlhf"}  # the optional dependencies (pyproject.toml's extra) an agent's libraries come with


def agent_class(name: str) -> type[Agent[Any]]:
    """The agent's class; refused in one line naming the extra to install when its libraries are missing."""
    try:
        return _imported(AGENTS[name])
    except ModuleNotFoundError as missing:
        if name not in EXTRAS or (missing.name or "rlinfluence").split(".")[0] == "rlinfluence":
            raise  # a module of ours missing is a broken install, not a missing extra
        extra = EXTRAS[name]
        raise ConfigError(
            f"env.agent={name} needs the {extra} extra, which is not installed here ({missing.name} is missing): "
            f"pip install 'rlinfluence[{extra}]' (in a checkout: pip install -e '.[{extra}]')"
        ) from None


def _imported(name: str) -> Any:
    module, attribute = name.split(":")
    return getattr(importlib.import_module(module), attribute)


def make_agent(cfg: DictConfig) -> Agent[Any]:
    return agent_class(cfg.env.agent)(cfg)


def seeds_of(agents: list[Agent[Any]]) -> Seeds[Any, Any]:
    """The agents' round.Seeds (they share every setting but the seed)."""
    return _imported(SEEDS[agents[0].cfg.env.agent])(agents)
