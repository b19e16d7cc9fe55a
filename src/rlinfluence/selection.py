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

from rlinfluence.config import ConfigError
from rlinfluence.records import RolloutBuffer, discounted_returns_to_go


@dataclass
class Selection:
    keep: np.ndarray  # bool, one entry per record id
    weights: np.ndarray | None = None  # sampling probabilities over record ids (reweighting methods)
    # True: the dropped records leave the minibatches cut from the shuffle of *all* records, which stay
    # as the standard update draws them (the counterfactual of analyses/counterfactual.py); False: the
    # kept records are reshuffled into full minibatches (IIF).
    in_place: bool = False

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


def check_p(cfg: DictConfig) -> None:
    """Methods that drop a share of the negative records need p in (0, 100]."""
    p = cfg.method.p
    if p is None or not 0 < p <= 100:
        raise ConfigError(f"method.p={p} must be in (0, 100] (percent of negative-influence records to drop)")


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


def monte_carlo_advantages(buffer: RolloutBuffer, gamma: float) -> np.ndarray:
    """Ā(s, a) = Q̄(s, a) − V̄(s) from the buffer alone (paper App. B.4): Q̄ is the mean discounted
    return-to-go of the records with that state and action, V̄ the mean over the records with that
    state. States are the buffer's `state_keys`; discrete actions only."""
    if buffer.state_keys is None:
        raise ValueError("Monte-Carlo advantages need the buffer's state_keys (set env.state_key)")
    if buffer.actions.ndim != 1:
        raise ValueError("Monte-Carlo advantages need discrete actions (one index per record)")
    returns = discounted_returns_to_go(buffer, gamma)

    def group_mean(keys: np.ndarray) -> np.ndarray:
        _, group = np.unique(keys, axis=0, return_inverse=True)
        group = group.reshape(-1)
        return (np.bincount(group, weights=returns) / np.bincount(group))[group]

    states = buffer.state_keys.numpy()
    return group_mean(np.stack([states, buffer.actions.numpy().astype(np.int64)], axis=1)) - group_mean(states)


class DropAdvantageMismatch(SelectionMethod):
    """Advantage heuristics H1/H2 (paper App. B.4): among the records whose Monte-Carlo advantage Ā
    and GAE advantage Â have opposite signs, drop ⌊n_mismatch·p/100⌋ — the analogue of IIF's count
    with "mismatched" in place of "negative influence" — ranked by
    H1: the largest |Ā − Â|;  H2: the most negative Ā·Â.
    A zero on either side is no mismatch (a state seen with one action only has Ā = 0: no evidence)."""

    VARIANTS = ("h1", "h2")

    def __init__(self, variant: str, p: float, gamma: float):
        self.variant, self.p, self.gamma = variant, p, gamma

    @classmethod
    def check_config(cls, cfg):
        if cfg.method.variant not in cls.VARIANTS:
            raise ConfigError(f"method.variant={cfg.method.variant!r} is not one of: {', '.join(cls.VARIANTS)} "
                              "(method=advantage H1 drops by |Ā − Â|, H2 by Ā·Â)")
        check_p(cfg)
        if cfg.env.state_key is None:
            from rlinfluence.envs import envs_with_state_key

            raise ConfigError(f"method=advantage needs Monte-Carlo advantages over discrete states, which "
                              f"env={cfg.env.name} does not expose (env.state_key is unset); envs that do: "
                              f"{', '.join(envs_with_state_key())}")

    @classmethod
    def from_config(cls, cfg):
        return cls(cfg.method.variant, cfg.method.p, cfg.ppo.gamma)

    @classmethod
    def tag(cls, method):
        return f"{method.name}-{method.variant}-p{method.p:g}"

    def select(self, buffer, scores, rng):
        mc = monte_carlo_advantages(buffer, self.gamma)
        gae = buffer.advantages.numpy().astype(np.float64)
        agreement = mc * gae  # < 0: the signs disagree; plays the role of IIF's influence score
        mismatched = np.flatnonzero(agreement < 0)
        badness = np.abs(mc - gae) if self.variant == "h1" else -agreement
        worst_first = mismatched[np.argsort(-badness[mismatched], kind="stable")]
        keep = np.ones(len(buffer), bool)
        keep[worst_first[: n_to_drop(agreement, self.p)]] = False
        return Selection(keep)


def rank_priorities(td_errors: np.ndarray, alpha: float) -> np.ndarray:
    """Rank-based prioritised replay (Schaul et al. 2016): P_i = 1/rank(|δ_i|), rank 1 the largest
    (ties by record id), sampling probability P_i^α / Σ_j P_j^α."""
    order = np.argsort(-np.abs(td_errors), kind="stable")
    ranks = np.empty(len(td_errors))
    ranks[order] = np.arange(1, len(td_errors) + 1)
    priorities = ranks ** -alpha
    return priorities / priorities.sum()


class TDErrorReweighting(SelectionMethod):
    """PER-style reweighting by the TD errors δ at θ_k (paper App. B.5): nothing is dropped; each
    epoch the update draws N ids with replacement by these probabilities (update.minibatch_ids)."""

    ALPHA = 0.6  # the paper's (and PER's rank-based) exponent

    def select(self, buffer, scores, rng):
        return Selection(np.ones(len(buffer), bool), rank_priorities(buffer.deltas.numpy().astype(np.float64),
                                                                     self.ALPHA))


SELECTION_METHODS: dict[str, type[SelectionMethod]] = {
    "ppo": KeepAll,
    "iif": DropMostNegative,
    "random": DropRandom,
    "advantage": DropAdvantageMismatch,
    "td_error": TDErrorReweighting,
}


def make_selection(cfg: DictConfig) -> SelectionMethod:
    return SELECTION_METHODS[cfg.method.name].from_config(cfg)
