"""`task=intervene` (paper §4.3, Fig. 5, 11): does dropping the negative-influence records of one round
help that round?

For each round k of a standard-PPO run, from the state it began in (θ_k, optimizer, RNGs) and on the
buffer it collected, the round's update is run three times: on every record (what the run did; its
θ_k+1 must match the run's snapshot bit for bit), without all negative-influence records (IIF with
p = 100 %), and without as many records chosen uniformly at random (seeded by (seed, k)). Each is
evaluated on the round's evaluation episodes, the same for all three (evaluation.py).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from omegaconf import DictConfig

from rlinfluence.analyses.standard_run import analyse_rounds, before_round, check_rounds, matches_run, rerun_update
from rlinfluence.records import RolloutBuffer
from rlinfluence.round import Trainer
from rlinfluence.selection import DropMostNegative, DropRandom, KeepAll, Selection
from rlinfluence.tasks import register

ALL, INFLUENCE, RANDOM = "all", "influence", "random"


def arm_selections(buffer: RolloutBuffer, scores: np.ndarray, rng: np.random.Generator) -> dict[str, Selection]:
    return {ALL: KeepAll().select(buffer, scores, rng),
            INFLUENCE: DropMostNegative(100.0).select(buffer, scores, rng),
            RANDOM: DropRandom(100.0).select(buffer, scores, rng)}


def intervene_round(trainer: Trainer, run_dir: Path, k: int) -> pd.DataFrame:
    start = before_round(trainer, run_dir, k)
    buffer = trainer.collect()
    scores = trainer.influence(buffer)
    rows = []
    seed = trainer.cfg.seed
    for arm, selection in arm_selections(buffer, scores, np.random.default_rng([seed, k])).items():
        rerun_update(trainer, start, buffer, selection)
        row = {"env": trainer.cfg.env.name, "seed": seed, "round": k, "arm": arm, "n_records": len(buffer),
               "n_dropped": len(buffer) - selection.n_kept, "n_negative": int((scores < 0).sum())}
        row |= trainer.evaluator.evaluate(trainer.model, k)
        row["matches_run"] = matches_run(trainer, run_dir, k) if arm == ALL else None
        rows.append(row)
    return pd.DataFrame(rows)


@register("intervene")
def intervene(cfg: DictConfig) -> pd.DataFrame:
    rounds = list(cfg.analysis.intervene.rounds) or list(range(1, cfg.env.rounds + 1))
    check_rounds(cfg, "analysis.intervene.rounds", rounds)
    return analyse_rounds(cfg, "intervene", rounds, intervene_round)
