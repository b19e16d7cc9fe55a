"""`task=intervene` (paper §4.3, Fig. 5, 11): does dropping the negative-influence records of one round
help that round?

For each round k of a standard-PPO run, from the state it began in (θ_k, optimizer, RNGs) and on the
buffer it collected, the round's update is run three times: on every record (what the run did; its
θ_k+1 must match the run's snapshot bit for bit), without the negative-influence records (IIF with
p = analysis.intervene.p: 100 % drops all of them, as the paper does; the env's p drops what an IIF
round drops), and without as many records chosen uniformly at random (seeded by (seed, k)). Each is
evaluated on the round's evaluation episodes, the same for all three (control/evaluation.py). Rows at p < 100
go to their own file (`<env>-seed<k>-p<p>.csv`), beside the paper's.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from omegaconf import DictConfig

from rlinfluence.analyses.standard_run import (
    analyse_rounds,
    before_round,
    check_outputs,
    check_rounds,
    every_round_if_empty,
    matches_run,
    rerun_update,
)
from rlinfluence.control.engine import Seed
from rlinfluence.records import RolloutBuffer
from rlinfluence.run.tasks import register
from rlinfluence.selection import DropMostNegative, DropRandom, KeepAll, Selection
from rlinfluence.share import FilterShare

ALL, INFLUENCE, RANDOM = "all", "influence", "random"


def p_variant(p: FilterShare) -> str:
    """The file suffix of rows at p (write_rows): none for the paper's 100, `-p12.5` otherwise."""
    return "" if p.percent == 100 else f"-p{p}"


def arm_selections(
    buffer: RolloutBuffer, scores: np.ndarray, rng: np.random.Generator, p: FilterShare
) -> dict[str, Selection]:
    return {
        ALL: KeepAll().select(buffer, scores, rng),
        INFLUENCE: DropMostNegative(p).select(buffer, scores, rng),
        RANDOM: DropRandom(p).select(buffer, scores, rng),
    }


def intervene_round(trainer: Seed, run_dir: Path, k: int) -> pd.DataFrame:
    start = before_round(trainer, run_dir, k)
    buffer = trainer.collect(k)
    scores = trainer.influence(buffer)
    rows = []
    seed, p = trainer.cfg.seed, intervene_share(trainer.cfg)
    for arm, selection in arm_selections(buffer, scores, np.random.default_rng([seed, k]), p).items():
        rerun_update(trainer, start, buffer, selection)
        row = {
            "env": trainer.cfg.env.name,
            "seed": seed,
            "round": k,
            "arm": arm,
            "n_records": len(buffer),
            "n_dropped": len(buffer) - selection.n_kept,
            "n_negative": int((scores < 0).sum()),
            "p": p.percent,
        }
        row |= trainer.evaluator.evaluate(trainer.model, k)
        row["matches_run"] = matches_run(trainer, run_dir, k) if arm == ALL else None
        rows.append(row)
    return pd.DataFrame(rows)


def intervene_rounds(cfg: DictConfig) -> list[int]:
    return every_round_if_empty(cfg, cfg.analysis.intervene.rounds)


def intervene_share(cfg: DictConfig) -> FilterShare:
    """analysis.intervene.p: the share of each round's negative-influence records the influence arm drops."""
    return FilterShare.parse(cfg.analysis.intervene.p, "analysis.intervene.p")


def check_intervene(cfg: DictConfig) -> None:
    check_outputs(cfg)
    check_rounds(cfg, "analysis.intervene.rounds", intervene_rounds(cfg))
    intervene_share(cfg)


@register("intervene", check=check_intervene)
def intervene(cfg: DictConfig) -> pd.DataFrame:
    return analyse_rounds(cfg, "intervene", intervene_rounds(cfg), intervene_round, p_variant(intervene_share(cfg)))
