"""The trainers the round loop drives, chosen by `env.agent`.

An agent owns a run's model, optimizer and RNGs and does the stages of a round: `initial_row()`,
`run_round(k)` (collect, attribute, select, update, evaluate; one metrics row), `state_dict(k)` /
`load_state_dict(state)` (the checkpoint) and `close()`; `columns` names its metrics.csv columns and
`check_config(cfg)` rejects settings it cannot run (one line naming the key). round.train runs any of
them; the selection methods (selection.py) serve both. Imported lazily: the language-model agent
needs transformers, which a control run never loads.
"""

from __future__ import annotations

import importlib
from typing import Any

from omegaconf import DictConfig

AGENTS = {"control": "rlinfluence.round:Trainer", "lm": "rlinfluence.lm.trainer:LMTrainer"}


def agent_class(name: str) -> Any:
    module, cls = AGENTS[name].split(":")
    return getattr(importlib.import_module(module), cls)


def make_agent(cfg: DictConfig) -> Any:
    return agent_class(cfg.env.agent)(cfg)
