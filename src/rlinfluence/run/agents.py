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

from rlinfluence.round import Agent

AGENTS = {"control": "rlinfluence.control.trainer:Trainer", "lm": "rlinfluence.lm.trainer:LMTrainer"}


def agent_class(name: str) -> type[Agent[Any, Any]]:
    module, cls = AGENTS[name].split(":")
    return getattr(importlib.import_module(module), cls)


def make_agent(cfg: DictConfig) -> Agent[Any, Any]:
    return agent_class(cfg.env.agent)(cfg)
