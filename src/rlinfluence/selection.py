"""Which records the PPO update trains on: one interface for every method.

A method turns the round's buffer (and, if it needs them, the influence scores) into a
`Selection`: a keep-mask, or sampling weights for methods that reweight instead of filter.
`SELECTION_METHODS` maps `method.name` to its class; adding a method is adding an entry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from omegaconf import DictConfig

from rlinfluence.config import check_p
from rlinfluence.records import RolloutBuffer


@dataclass
class Selection:
    keep: np.ndarray  # bool, one entry per record id
    weights: np.ndarray | None = None  # sampling probabilities over record ids (reweighting methods)

    @property
    def n_kept(self) -> int:
        return int(self.keep.sum())


class SelectionMethod:
    needs_scores: ClassVar[bool] = False

    @classmethod
    def check_config(cls, cfg: DictConfig) -> None:
        """Raise ConfigError for settings this method cannot run with."""

    @classmethod
    def from_config(cls, cfg: DictConfig) -> "SelectionMethod":
        return cls()

    @classmethod
    def tag(cls, method: DictConfig) -> str:
        """The method's part of the run directory name."""
        return str(method.name)

    def select(self, buffer: RolloutBuffer, scores: np.ndarray | None, rng: np.random.Generator) -> Selection:
        raise NotImplementedError


def n_to_drop(scores: np.ndarray, p: float) -> int:
    """IIF's count: ⌊n_neg · p / 100⌋, n_neg = the number of negative-influence records."""
    return int(np.floor(np.count_nonzero(scores < 0) * p / 100))


class KeepAll(SelectionMethod):
    """Standard PPO: train on every record."""

    def select(self, buffer, scores, rng):
        return Selection(np.ones(len(buffer), bool))


class _DropShareOfNegatives(SelectionMethod):
    """Methods parameterised by p, the percent of negative-influence records to drop."""

    needs_scores = True

    def __init__(self, p: float):
        self.p = p

    @classmethod
    def check_config(cls, cfg):
        check_p(cfg)

    @classmethod
    def from_config(cls, cfg):
        return cls(cfg.method.p)

    @classmethod
    def tag(cls, method):
        return f"{method.name}-p{method.p:g}" if method.p is not None else str(method.name)


class DropMostNegative(_DropShareOfNegatives):
    """IIF: drop the ⌊n_neg·p/100⌋ records with the most negative influence (ties by record id)."""

    def select(self, buffer, scores, rng):
        keep = np.ones(len(buffer), bool)
        keep[np.argsort(scores, kind="stable")[: n_to_drop(scores, self.p)]] = False
        return Selection(keep)


class DropRandom(_DropShareOfNegatives):
    """Random filtering: drop as many records as IIF would this round (⌊n_neg·p/100⌋, counted on
    the round's own influence scores), chosen uniformly among all records with the seeded RNG."""

    def select(self, buffer, scores, rng):
        keep = np.ones(len(buffer), bool)
        keep[rng.choice(len(buffer), size=n_to_drop(scores, self.p), replace=False)] = False
        return Selection(keep)


SELECTION_METHODS: dict[str, type[SelectionMethod]] = {
    "ppo": KeepAll,
    "iif": DropMostNegative,
    "random": DropRandom,
}


def make_selection(cfg: DictConfig) -> SelectionMethod:
    return SELECTION_METHODS[cfg.method.name].from_config(cfg)
