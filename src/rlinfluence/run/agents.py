"""The agents the round loop drives, chosen by `env.agent`: `Agent` is what round.py asks of one.

An agent owns a run's model, optimizer and RNGs and does what is its own in each stage of a round; the
loop (round.py) runs the stages in order, times them, does the selection (selection.py serves every
agent) and writes the metrics row, with the fields every agent shares and NaN for what a round did not
measure. Imported lazily: the language-model agent needs transformers, which a control run never loads.
"""

from __future__ import annotations

import importlib
from typing import Any, ClassVar, Protocol, TypeVar

import numpy as np
from omegaconf import DictConfig

from rlinfluence.records import Records
from rlinfluence.selection import Influence, Selection, SelectionMethod

AGENTS = {"control": "rlinfluence.control.trainer:Trainer", "lm": "rlinfluence.lm.trainer:LMTrainer"}

R = TypeVar("R", bound=Records)


class Agent(Protocol[R]):
    """One run's trainer, on records of type R (control: `RolloutBuffer`; lm: `Sequences`)."""

    cfg: DictConfig
    columns: ClassVar[list[str]]  # its metrics.csv columns, in order
    method: SelectionMethod  # method.name's selection, which the loop applies to its records
    selection_rng: np.random.Generator

    def __init__(self, cfg: DictConfig) -> None:
        """Build the run's model, optimizer, envs and RNGs from its (validated) config."""

    @classmethod
    def check_config(cls, cfg: DictConfig) -> None:
        """Raise ConfigError (one line naming the key) on settings this agent cannot run with."""

    def state_fields(self) -> dict[str, float]:
        """The row's fields on the agent's state at the start of a round (the LM's KL coefficient)."""

    def collect(self, k: int) -> R:
        """Round k's records (rollouts; generated and scored responses)."""

    def forward(self, k: int, records: R) -> dict[str, float]:
        """What the update needs of the records at θ_k that collecting did not compute; the row's fields."""

    def attribute(self, k: int, records: R) -> Influence:
        """The records' influence at θ_k, when the method (or a measurement) needs it."""

    def update(self, k: int, records: R, selection: Selection, influence: Influence) -> dict[str, float]:
        """Round k's update on the selected records; the row's fields (losses, gradient steps, ...)."""

    def train_return(self, records: R) -> float:
        """The round's training return (NaN when nothing finished)."""

    def evaluate(self, k: int) -> dict[str, float]:
        """The test return of the policy after round k (the row's evaluation fields)."""

    def state_dict(self, k: int) -> dict[str, Any]:
        """Everything the run resumes from after round k (the checkpoint)."""

    def load_state_dict(self, state: dict[str, Any]) -> int:
        """Restore a checkpoint; returns its round."""

    def close(self) -> None:
        """Release what the agent holds open (env processes)."""


def agent_class(name: str) -> type[Agent[Any]]:
    module, cls = AGENTS[name].split(":")
    return getattr(importlib.import_module(module), cls)


def make_agent(cfg: DictConfig) -> Agent[Any]:
    return agent_class(cfg.env.agent)(cfg)
