"""`task=counterfactual` (beyond the paper): does influence predict what removing records does?

At round k of a standard-PPO run, from the state the round began in (θ_k, optimizer, RNGs) and on the
buffer it collected, the round's update is rerun without a group of records: random groups of each size
in `analysis.counterfactual.sizes` (fractions of the buffer, `groups` of each), IIF's drop set (the env's
p) and all negative-influence records. The actual change of the target, Δf = f(θ_k+1 without G) −
f(θ_k+1), with f = f_return on the round's buffer, is set beside what the round-start influence scores
predict; and the change of the test return on `eval_episodes` episodes, the same for every group.

Same update randomness: the removal is in place (Selection.in_place). Each epoch shuffles all N records
exactly as the standard update does and cuts the same minibatches; the group's records just leave
theirs. The empty group thus reproduces the run's θ_k+1 bit for bit (`matches_run`), and the only
difference between the two updates is the removal.

The prediction. Influence (influence.py) is I_i = ⟨∇ℓ_i, ∇L_f⟩ at θ_k, L_f = −f; positive: a gradient
step on record i raises f. A minibatch step is θ ← θ − η · mean_{i∈B} ∇ℓ_i. Removing the records R from a
minibatch B (K = B \\ R kept, the mean now over K) changes the step by (η/|K|) Σ_{i∈R} (∇ℓ_i − mean_B ∇ℓ),
so to first order at θ_k (summed over every minibatch of every epoch; each record is in one per epoch):

    centred:  Δf ≈ −η Σ_B (1/|K_B|) Σ_{i∈R_B} (I_i − mean_{j∈B} I_j)
    plain:    Δf ≈ −η Σ_B (1/|B|) Σ_{i∈R_B} I_i  =  −η · n_epochs / batch_size · Σ_{i∈G} I_i

"plain" is the sum of the group's scores times the update's effective step (η per minibatch step, shared
by the batch_size records of its mean, n_epochs times), what ranking records by I_i assumes; "centred"
adds that the kept records of a smaller minibatch weigh more. (A minibatch that loses every record is
skipped, and its whole step is lost: −η mean_B I.) Neither models what the first order leaves out: the
update moving θ away from θ_k over its n_epochs · N / batch_size steps, PPO's clip once the ratio moves,
the advantages renormalised within the smaller minibatch, the value loss (it shares the CNN extractor in
image envs). Under Adam, η is not the step size, so only the correlations (scale-free) mean anything.
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

import numpy as np
import pandas as pd
from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

from rlinfluence.analyses.standard_run import (
    analyse_rounds,
    before_round,
    check_at_least_one,
    check_outputs,
    check_rounds,
    matches_run,
    rerun_update,
)
from rlinfluence.choices import ConfigError
from rlinfluence.config.schema import EvalConfig, PPOConfig
from rlinfluence.control.engine import Seed
from rlinfluence.control.evaluation import Evaluator
from rlinfluence.influence import target_value
from rlinfluence.records import RolloutBuffer
from rlinfluence.run.tasks import register
from rlinfluence.seeding import spawn_streams
from rlinfluence.selection import DropMostNegative, Selection
from rlinfluence.share import FilterShare
from rlinfluence.update import minibatch_ids

NONE, RANDOM, IIF, NEGATIVE = "none", "random", "iif", "all_negative"  # the kinds of removed group


def minibatch_plan(start: dict, n_records: int, ppo: PPOConfig) -> list[np.ndarray]:
    """The record ids of every minibatch of the round's standard update, in order: drawn from a copy of
    the shuffle RNG the update starts from."""
    rng = np.random.default_rng()
    rng.bit_generator.state = start["shuffle_rng"]
    everything = Selection(np.ones(n_records, bool))
    return [
        batch.numpy()
        for _ in range(ppo.n_epochs)
        for batch in minibatch_ids(everything, ppo.batch_size, rng, ppo.drop_last_minibatch)
    ]


def predicted_changes(
    scores: np.ndarray, removed: np.ndarray, plan: list[np.ndarray], lr: float
) -> tuple[float, float]:
    """First-order Δf of removing the records `removed` (bool per record) in place: (plain, centred),
    as the module docstring derives them."""
    plain = centred = 0.0
    for batch in plan:
        gone = removed[batch]
        if not gone.any():
            continue
        batch_scores = scores[batch]
        plain += batch_scores[gone].sum() / len(batch)
        n_kept = len(batch) - int(gone.sum())
        centred += (batch_scores[gone] - batch_scores.mean()).sum() / n_kept if n_kept else batch_scores.mean()
    return -lr * plain, -lr * centred


def removal_groups(
    buffer: RolloutBuffer, scores: np.ndarray, cfg: DictConfig, rng: np.random.Generator
) -> list[tuple[str, float, np.ndarray]]:
    """(kind, size as a fraction of the buffer, removed mask) of each group, the empty group first."""
    n = len(scores)

    def mask(ids: np.ndarray) -> np.ndarray:
        removed = np.zeros(n, bool)
        removed[ids] = True
        return removed

    groups = [(NONE, 0.0, np.zeros(n, bool))]
    for size in cfg.analysis.counterfactual.sizes:
        groups += [
            (RANDOM, float(size), mask(rng.choice(n, size=max(1, round(size * n)), replace=False)))
            for _ in range(cfg.analysis.counterfactual.groups)
        ]
    for kind, p in ((IIF, float(cfg.env.p)), (NEGATIVE, 100.0)):
        removed = ~DropMostNegative(FilterShare(p)).select(buffer, scores, rng).keep
        groups.append((kind, removed.mean(), removed))
    return groups


def counterfactual_round(trainer: Seed, run_dir: Path, k: int, evaluator: Evaluator | None) -> pd.DataFrame:
    cfg = trainer.cfg
    start = before_round(trainer, run_dir, k)
    buffer = trainer.collect(k)
    scores = trainer.influence(buffer).astype(np.float64)
    plan = minibatch_plan(start, len(buffer), cfg.ppo)
    rows, reference = [], {}
    groups = removal_groups(buffer, scores, cfg, np.random.default_rng([cfg.seed, k]))
    # A round retrains the update once per group, each tested on eval_episodes: minutes at the defaults.
    shown = tqdm(groups, desc=f"round {k} removal groups", unit="group", disable=not cfg.progress)
    for index, (kind, size, removed) in enumerate(shown):
        rerun_update(trainer, start, buffer, Selection(~removed, in_place=True))
        f = target_value(trainer.model, buffer, trainer.target)
        test = evaluator.evaluate(trainer.model, k)["test_return"] if evaluator else float("nan")
        if kind == NONE:
            reference = {"f": f, "test": test}
        plain, centred = predicted_changes(scores, removed, plan, trainer.learning_rate(k))
        rows.append(
            {
                "env": cfg.env.name,
                "seed": cfg.seed,
                "round": k,
                "kind": kind,
                "size": size,
                "group": index,
                "n_removed": int(removed.sum()),
                "influence_sum": scores[removed].sum(),
                "predicted_plain": plain,
                "predicted_centred": centred,
                "f_return": f,
                "actual": f - reference["f"],
                "test_return": test,
                "test_change": test - reference["test"],
                "matches_run": matches_run(trainer, run_dir, k) if kind == NONE else None,
            }
        )
    return pd.DataFrame(rows)


def check_counterfactual(cfg: DictConfig) -> None:
    check_outputs(cfg)
    settings = cfg.analysis.counterfactual
    check_rounds(cfg, "analysis.counterfactual.rounds", list(settings.rounds))
    if not settings.sizes or not all(0 < size < 1 for size in settings.sizes):
        raise ConfigError(
            f"analysis.counterfactual.sizes={list(settings.sizes)} must be fractions of the buffer in (0, 1)"
        )
    check_at_least_one(settings, "analysis.counterfactual", {"groups": "random groups per size"})
    if settings.eval_episodes < 0:
        raise ConfigError(
            f"analysis.counterfactual.eval_episodes={settings.eval_episodes} must be >= 0 (0: no test return)"
        )


@register("counterfactual", check=check_counterfactual)
def counterfactual(cfg: DictConfig) -> pd.DataFrame:
    episodes = cfg.analysis.counterfactual.eval_episodes
    # The run's own evaluation stream, so every group of round k is tested on the same episodes.
    evaluator = (
        Evaluator(
            cfg.env,
            cast(EvalConfig, OmegaConf.merge(cfg.eval, {"episodes": episodes})),
            spawn_streams(cfg.seed)["eval"],
        )
        if episodes
        else None
    )
    try:
        return analyse_rounds(
            cfg,
            "counterfactual",
            list(cfg.analysis.counterfactual.rounds),
            lambda trainer, run_dir, k: counterfactual_round(trainer, run_dir, k, evaluator),
        )
    finally:
        if evaluator:
            evaluator.close()
