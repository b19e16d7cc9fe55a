"""Which records the PPO update trains on: one interface for every method and every agent.

A method turns the round's records (and, if it needs them, the influence scores) into a
`Selection`: a keep-mask, or sampling weights for methods that reweight instead of filter.
`SELECTION_METHODS` maps `method.name` to its class (`@register_method`; docs/extending.md). The methods
that read no more of a record than its id and influence take any agent's `Records`; the heuristics
(advantage, td_error) read the control agent's `RolloutBuffer`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, TypeVar

import numpy as np

from rlinfluence.choices import ConfigError, require, require_one_of
from rlinfluence.records import Records, RolloutBuffer, discounted_returns_to_go, episode_ids
from rlinfluence.share import FilterShare
from rlinfluence.targets import EntropyTarget, ReturnTarget, Target, UpdateLossTarget

if TYPE_CHECKING:  # the config's type only: drop_set (the attribution API) selects without OmegaConf
    from omegaconf import DictConfig

# The round's influence scores of every record on any target at θ_k (the round loop passes it to
# methods that need scores on more than the configured target).
Attribute = Callable[[Target], np.ndarray]


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


@dataclass
class Influence:
    """What a round's attribution stage gives its selection: each record's influence on the agent's
    target (None when the method needs none), and for methods that score more targets than that one,
    the attribution itself."""

    scores: np.ndarray | None = None
    attribute: Attribute | None = None


class SelectionMethod:
    """A filter method: `select` turns a round's records (and their influence scores, if `needs_scores`) into
    the records its update trains on. Registered under its `method.name` by `register_method`; its settings
    are its conf/method/<name>.yaml (docs/extending.md, "Add a filter method")."""

    needs_scores: ClassVar[bool] = False
    settings: ClassVar[tuple[str, ...]] = ()  # the method.* keys it reads besides its name (validation warns of others)
    # True: it reads no more of a record than its id and influence, so it runs on any agent's records (the
    # language-model agent runs only these); False: it reads the control agent's RolloutBuffer or attribution.
    any_agent: ClassVar[bool] = False

    @classmethod
    def check_config(cls, cfg: DictConfig) -> None:
        """Raise ConfigError for settings this method cannot run with."""

    @classmethod
    def from_config(cls, cfg: DictConfig) -> SelectionMethod:
        return cls()

    @classmethod
    def tag(cls, method: DictConfig) -> str:
        """The method's part of the run directory name."""
        return str(method.name)

    def scored_target(self, agent_target: Target) -> Target:
        """The target the control agent's round scores the records on for this method (`select`'s
        `scores`): the agent's own (target.name), unless the method scores against something else."""
        return agent_target

    def select(
        self, buffer: Records, scores: np.ndarray | None, rng: np.random.Generator, attribute: Attribute | None = None
    ) -> Selection:
        raise NotImplementedError


SELECTION_METHODS: dict[str, type[SelectionMethod]] = {}  # method.name -> its class, in registration order

Method = TypeVar("Method", bound=type[SelectionMethod])


def register_method(name: str) -> Callable[[Method], Method]:
    """`@register_method("name")` on a SelectionMethod subclass makes it `method=name` (with conf/method/name.yaml)."""

    def add(method: Method) -> Method:
        if name in SELECTION_METHODS:
            raise ValueError(f"method {name!r} is registered already, by {SELECTION_METHODS[name].__name__}")
        SELECTION_METHODS[name] = method
        return method

    return add


def method_share(cfg: DictConfig, auto: bool = False) -> FilterShare:
    """method.p as a share: a number in (0, 100]; the methods that rank records by influence (`auto`) also
    take p=auto."""
    note = "" if auto else f"; p=auto is for method={', '.join(AUTO_METHODS)}"
    return FilterShare.parse(cfg.method.p, "method.p", auto, note)


def n_to_drop(scores: np.ndarray, share: FilterShare) -> int:
    """IIF's count: ⌊n_neg · p / 100⌋, n_neg = the number of negative-influence records."""
    return share.count(int(np.count_nonzero(scores < 0)))


# method.granularity: what a filter drops, single records (the paper's IIF) or whole episodes
RECORD, EPISODE = "record", "episode"
GRANULARITIES = (RECORD, EPISODE)


def method_granularity(cfg: DictConfig) -> str:
    """method.granularity (unset: record), or a one-line ConfigError: a value outside GRANULARITIES, one set
    for a method that does not take it, or episodes where the records are not the control agent's steps."""
    value = cfg.method.granularity
    if value is None:
        return RECORD
    takers = [name for name, method in SELECTION_METHODS.items() if "granularity" in method.settings]
    require(
        cfg.method.name in takers,
        f"method.granularity={value} does not apply to method={cfg.method.name}; it is for method={', '.join(takers)}",
    )
    require_one_of("method.granularity", value, GRANULARITIES)
    require(
        value == RECORD or cfg.env.agent == "control",
        f"method.granularity=episode needs the control agent's episodes; env={cfg.env.name} "
        f"(env.agent={cfg.env.agent}) has none",
    )
    return str(value)


def episodes_to_drop(episodes: np.ndarray, scores: np.ndarray, record_count: int) -> np.ndarray:
    """method.granularity=episode: which records to drop (a mask) when whole episodes go instead of single
    records. An episode's score is the sum of its records' (`episodes`: each record's episode id,
    records.episode_ids); the candidates are the episodes with a negative sum, most negative first (ties
    by episode id). The rounding rule: of the prefixes of that order, the one whose record total is nearest
    to `record_count` (the records the method would drop one by one), ties to the shorter; so the drops
    differ from the record-level count by at most half the episode at the boundary, or fall short when
    the negative episodes run out."""
    sums = np.bincount(episodes, weights=scores)
    order = np.argsort(sums, kind="stable")[: np.count_nonzero(sums < 0)]
    totals = np.concatenate([[0], np.cumsum(np.bincount(episodes)[order])])
    n_episodes = int(np.argmin(np.abs(totals - record_count)))  # argmin: the first, so the shorter on ties
    return np.isin(episodes, order[:n_episodes])


@register_method("ppo")
class KeepAll(SelectionMethod):
    """Standard PPO: train on every record."""

    any_agent = True

    def select(self, buffer, scores, rng, attribute=None):
        return Selection(np.ones(len(buffer), bool))


class _DropShareOfNegatives(SelectionMethod):
    """Methods parameterised by p, the percent of negative-influence records to drop."""

    needs_scores = True
    settings: ClassVar[tuple[str, ...]] = ("p",)

    takes_auto: ClassVar[bool] = False  # p=auto: the drop count chosen each round on held-out records

    def __init__(self, p: FilterShare, granularity: str = RECORD):
        self.p, self.granularity = p, granularity

    @classmethod
    def check_config(cls, cfg):
        method_share(cfg, cls.takes_auto)

    @classmethod
    def from_config(cls, cfg):
        return cls(method_share(cfg, cls.takes_auto), method_granularity(cfg))

    @classmethod
    def tag(cls, method):
        """`iif-p50`; `iif-ep-p50` for whole episodes (record, the default, adds nothing: the runs from
        before method.granularity keep their dirs)."""
        parts = [str(method.name)] + (["ep"] if method.get("granularity") == EPISODE else [])
        if method.p is not None:
            parts.append(f"p{FilterShare.parse(method.p, 'method.p', cls.takes_auto)}")
        return "-".join(parts)


@register_method("iif")
class DropMostNegative(_DropShareOfNegatives):
    """IIF: drop the ⌊n_neg·p/100⌋ records with the most negative influence (ties by record id).
    With p=auto, as many of them as `held_out_drop_count` predicts to help. With
    method.granularity=episode, whole episodes by their summed influence instead, about as many records
    as that count (`episodes_to_drop`'s rounding rule; the control agent only)."""

    settings: ClassVar[tuple[str, ...]] = ("p", "granularity")
    takes_auto = True
    any_agent = True

    def drop_order(self, buffer: Records, scores: np.ndarray, attribute: Attribute | None) -> np.ndarray:
        """The records the method may drop, in the order it drops them: the negative ones, most negative first."""
        return np.argsort(scores, kind="stable")[: np.count_nonzero(scores < 0)]

    def select(self, buffer, scores, rng, attribute=None):
        order = self.drop_order(buffer, scores, attribute)
        count = held_out_drop_count(order, len(buffer), attribute, rng) if self.p.is_auto else n_to_drop(scores, self.p)
        if self.granularity == EPISODE:  # method_granularity allows it on the control agent's buffer only
            return Selection(~episodes_to_drop(episode_ids(buffer), scores, count))
        keep = np.ones(len(buffer), bool)
        keep[order[:count]] = False
        return Selection(keep)


@register_method("consensus")
class DropAgainstConsensus(DropMostNegative):
    """Gradient consensus (method=consensus): IIF's rule, ⌊n_neg·p/100⌋ records dropped most negative
    first (ties by record id; method.granularity=episode as IIF's), on scores against the round's own
    update direction instead of a target's:

        c_i = ⟨∇ℓ_i(θ_k), ḡ⟩,   ḡ = ∇ (1/N) Σ_j ℓ_j(θ_k)   (targets.UpdateLossTarget)

    the same forward-mode pass as IIF's with ḡ as the target gradient. Sign: c_i > 0, a step on record i
    alone lowers the round's mean loss (the record agrees with the consensus); c_i < 0, its gradient
    opposes the mean one, and the most negative of those are dropped. No target, no held-out data: Σ_i
    c_i = N ‖ḡ‖² ≥ 0, so the records agree on average by construction, and the filter removes the
    dissent (no p=auto: that counts on held-out f_return)."""

    takes_auto = False
    any_agent = False  # ḡ and ℓ_i are the control agent's per-record PPO loss

    def __init__(self, p: FilterShare, granularity: str, direction: UpdateLossTarget):
        super().__init__(p, granularity)
        self.direction = direction

    @classmethod
    def check_config(cls, cfg):
        super().check_config(cfg)
        require(
            cfg.target.name == "return",
            f"target={cfg.target.name} does not apply to method=consensus, which scores against the round's "
            "own mean loss (leave target at its default)",
        )

    @classmethod
    def from_config(cls, cfg):
        direction = UpdateLossTarget(cfg.ppo.clip_range, cfg.ppo.ent_coef)  # the clip is inactive at θ_k
        return cls(method_share(cfg), method_granularity(cfg), direction)

    def scored_target(self, agent_target):
        return self.direction


@register_method("iif_guard")
class DropMostNegativeEntropyGuarded(DropMostNegative):
    """Robust IIF (method=iif_guard): IIF's drop order and count, skipping every drop that would let the
    kept records make the policy more deterministic than all records would.

    Why: a record's influence on f_return is negative when its advantage contradicts the direction the
    round's policy gradient already moves, so IIF drops the counter-evidence and each update amplifies
    the current consensus; without an entropy bonus an early wrong consensus then becomes a
    deterministic policy that never finds the reward again (paper_figures/README.md, *Collapse*).
    Standard PPO, which keeps the counter-evidence, does not collapse.

    The guard: e_i = the record's influence on the policy's mean entropy over the buffer's states
    (`EntropyTarget`; e_i < 0: training on it sharpens the policy). To first order the kept set's update
    changes the entropy by Σ_kept e_i, the full buffer's by Σ_all e_i. Walking IIF's candidates most
    negative first, a record is dropped only if the dropped ones keep Σ_dropped e ≤ 0, so after every
    drop the kept set's update sharpens the policy no faster than standard PPO's update would. Dropping
    a sharpening record frees room to drop a counter-evidence record; nothing is tuned per environment."""

    settings = ("p",)  # no episodes: the guard walks single records
    any_agent = False  # the entropy target is the control agent's

    def drop_order(self, buffer, scores, attribute):
        candidates = super().drop_order(buffer, scores, attribute)
        if candidates.size == 0:
            return candidates  # no negative record: skip the entropy pass
        return candidates[within_entropy_budget(attribute(EntropyTarget())[candidates])]


def within_entropy_budget(entropy_influence: np.ndarray) -> np.ndarray:
    """Which candidates (in drop order) the entropy guard drops: each one whose drop keeps the summed
    entropy influence of the dropped records ≤ 0, the others skipped (a mask over the candidates)."""
    accepted = np.zeros(entropy_influence.size, bool)
    dropped_sum = 0.0
    for j, change in enumerate(entropy_influence):
        if dropped_sum + change <= 0:
            accepted[j] = True
            dropped_sum += change
    return accepted


def held_out_scores(n_records: int, attribute: Attribute, rng: np.random.Generator) -> np.ndarray:
    """Each record's influence on the f_return of a random half of the buffer that does not hold it
    (the buffer split in two with the seeded selection RNG; each half scored against the other), so
    that no record votes on its own drop."""
    first = np.zeros(n_records, bool)
    first[rng.permutation(n_records)[: n_records // 2]] = True
    on_first, on_second = (attribute(ReturnTarget(np.flatnonzero(half))) for half in (first, ~first))
    return np.where(first, on_second, on_first)


def best_drop_count(held_out_in_order: np.ndarray) -> int:
    """The m that maximises the predicted held-out gain of dropping the first m candidates: to first
    order, dropping record i changes the held-out f_return by −score_i, so the gain is −Σ_{j≤m} score_j.
    Ties go to the smaller m; 0 when no drop is predicted to help."""
    gain = np.concatenate([[0.0], -np.cumsum(held_out_in_order)])
    return int(np.argmax(gain))


def held_out_drop_count(order: np.ndarray, n_records: int, attribute: Attribute, rng: np.random.Generator) -> int:
    """p=auto: how many of the candidates `order` to drop this round, without a per-environment p. The
    candidates are ranked on the whole buffer, as IIF ranks them; the count is the one whose drops the
    held-out scores predict to raise the return the most (the largest p whose gain keeps improving)."""
    if order.size == 0 or n_records < 2:
        return 0  # nothing to drop, or no record to hold out
    return best_drop_count(held_out_scores(n_records, attribute, rng)[order])


@register_method("random")
class DropRandom(_DropShareOfNegatives):
    """Random filtering: drop as many records as IIF would this round (⌊n_neg·p/100⌋, counted on
    the round's own influence scores), chosen uniformly among all records with the seeded RNG."""

    any_agent = True

    def select(self, buffer, scores, rng, attribute=None):
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


def advantage_agreement(buffer: RolloutBuffer, gamma: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(Ā, Â, Ā·Â): the Monte-Carlo and GAE advantages and their product, the agreement the advantage
    heuristics rank by (< 0: the signs disagree, Â looks wrong; it plays the role of IIF's influence score)."""
    mc = monte_carlo_advantages(buffer, gamma)
    gae = buffer.advantages.numpy().astype(np.float64)
    return mc, gae, mc * gae


@register_method("advantage")
class DropAdvantageMismatch(SelectionMethod):
    """Advantage heuristics H1/H2 (paper App. B.4): among the records whose Monte-Carlo advantage Ā
    and GAE advantage Â have opposite signs, drop ⌊n_mismatch·p/100⌋ — the analogue of IIF's count
    with "mismatched" in place of "negative influence" — ranked by
    H1: the largest |Ā − Â|;  H2: the most negative Ā·Â.
    A zero on either side is no mismatch (a state seen with one action only has Ā = 0: no evidence)."""

    # method.variant -> the badness of a mismatched record, from its Ā·Â (`agreement`) and both advantages
    VARIANTS: ClassVar[dict[str, Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]]] = {
        "h1": lambda mc, gae, agreement: np.abs(mc - gae),
        "h2": lambda mc, gae, agreement: -agreement,
    }
    settings = ("p", "variant")

    def __init__(self, variant: str, p: FilterShare, gamma: float):
        self.variant, self.p, self.gamma = variant, p, gamma

    @classmethod
    def check_config(cls, cfg):
        if cfg.method.variant not in cls.VARIANTS:
            raise ConfigError(
                f"method.variant={cfg.method.variant!r} is not one of: {', '.join(cls.VARIANTS)} "
                "(method=advantage H1 drops by |Ā − Â|, H2 by Ā·Â)"
            )
        method_share(cfg)
        if cfg.env.state_key is None:
            from rlinfluence.config.compose import envs_with_state_key  # here: the attribution API loads no Hydra

            raise ConfigError(
                f"method=advantage needs Monte-Carlo advantages over discrete states, which "
                f"env={cfg.env.name} does not expose (env.state_key is unset); envs that do: "
                f"{', '.join(envs_with_state_key())}"
            )

    @classmethod
    def from_config(cls, cfg):
        return cls(cfg.method.variant, method_share(cfg), cfg.ppo.gamma)

    @classmethod
    def tag(cls, method):
        return f"{method.name}-{method.variant}-p{FilterShare.parse(method.p, 'method.p')}"

    def select(self, buffer, scores, rng, attribute=None):
        mc, gae, agreement = advantage_agreement(buffer, self.gamma)
        mismatched = np.flatnonzero(agreement < 0)
        badness = self.VARIANTS[self.variant](mc, gae, agreement)
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
    priorities = ranks**-alpha
    return priorities / priorities.sum()


@register_method("td_error")
class TDErrorReweighting(SelectionMethod):
    """PER-style reweighting by the TD errors δ at θ_k (paper App. B.5): nothing is dropped; each
    epoch the update draws N ids with replacement by these probabilities (update.minibatch_ids)."""

    settings = ("alpha",)

    def __init__(self, alpha: float):
        self.alpha = alpha

    @classmethod
    def check_config(cls, cfg):
        alpha = cfg.method.alpha
        if alpha is None or alpha < 0:
            raise ConfigError(
                f"method.alpha={alpha} must be >= 0 (the exponent of the rank priorities; 0 draws uniformly)"
            )

    @classmethod
    def from_config(cls, cfg):
        return cls(cfg.method.alpha)

    def select(self, buffer, scores, rng, attribute=None):
        return Selection(
            np.ones(len(buffer), bool), rank_priorities(buffer.deltas.numpy().astype(np.float64), self.alpha)
        )


AUTO_METHODS = tuple(
    name
    for name, method in SELECTION_METHODS.items()
    if issubclass(method, _DropShareOfNegatives) and method.takes_auto
)


def make_selection(cfg: DictConfig) -> SelectionMethod:
    return SELECTION_METHODS[cfg.method.name].from_config(cfg)
