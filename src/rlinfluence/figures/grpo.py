"""IIF on GRPO in the tiny RLHF world (lm/grpo.py, +experiment=grpo_tiny): GRPO against GRPO + IIF and GRPO +
random filtering (dropping as many responses), with a thinned group's baseline as collected or recomputed over
the kept responses (env.lm.grpo.drop_baseline; one experiment each, `grpo_tiny_<baseline>`). Drawn from the
language-model runs' tidy CSV, as the RLHF outputs are (rlhf.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from rlinfluence import metrics
from rlinfluence.figures.fidelity import Sources
from rlinfluence.figures.formatting import MISSING_CELL, pm_over_seeds
from rlinfluence.figures.requirements import Output
from rlinfluence.figures.rlhf import LM_CURVE_NOTE, STAGES, TINY_STUDY, LMArm, LMRuns, reward_and_toxicity

BASELINES = ("collected", "recompute")
GRPO, GRPO_IIF, GRPO_RANDOM = LMArm("GRPO", "ppo"), LMArm("GRPO + IIF", "iif"), LMArm("GRPO + random", "random")
ARMS = (GRPO, GRPO_IIF, GRPO_RANDOM)


def grpo_runs(baseline: str) -> LMRuns:
    return LMRuns(**TINY_STUDY, experiment=f"grpo_tiny_{baseline}", arms=ARMS, overlay="grpo_tiny")


BOTH_BASELINES = Sources(tuple((baseline, grpo_runs(baseline)) for baseline in BASELINES))
# The paper's scale (GPT-Neo 2.7B on a GPU, the RLHF outputs' settings): each response's baseline as collected.
PAPER_SCALE = Sources(
    (
        (
            "collected",
            LMRuns(
                experiment="grpo",
                envs=("toxicity",),
                model="gpt_neo_2p7b",
                arms=ARMS,
                seeds=3,
                overrides=" env.lm.algorithm=grpo",
            ),
        ),
    )
)


def _rounds_to_grpo_peak(rows: pd.DataFrame) -> pd.Series:
    """Per (baseline, arm, seed): the first round whose test return reaches the peak standard GRPO of the same
    seed and baseline reached after round 0 (NaN if never)."""
    curves = rows.pivot_table(index=["source", "arm", "seed"], columns="round", values="test_return")
    reached = {}
    for (source, arm, seed), curve in curves.iterrows():
        peak = np.nanmax(curves.loc[(source, GRPO.label, seed)].to_numpy()[1:])
        first = metrics.first_round_reaching(curve.to_numpy(), peak)
        reached[source, arm, seed] = np.nan if first is None else float(first)
    return pd.Series(reached)


def grpo_table(output: Output[Sources], rows: pd.DataFrame) -> pd.DataFrame:
    """Per baseline and arm: final test toxicity and test return, rounds to standard GRPO's peak test return,
    kept share, per-round seconds of each stage and influence's share of the round; mean ± std over seeds."""
    last = rows[rows["round"] == rows["round"].max()].set_index(["source", "arm", "seed"])
    trained = rows[rows["round"] >= 1].assign(total=lambda r: r[list(STAGES)].sum(axis=1))
    per_seed = trained.groupby(["source", "arm", "seed"])[[*STAGES, "total", "n_kept", "n_records"]].mean()
    to_peak = _rounds_to_grpo_peak(rows)
    table = []
    for baseline in BASELINES:
        for arm in ARMS:
            key = (baseline, arm.label)
            if key not in per_seed.index.droplevel("seed"):
                continue
            seconds = per_seed.loc[key]
            filtered = arm != GRPO
            table.append(
                {
                    "Baseline": baseline,
                    "Arm": arm.label,
                    "Seeds": str(len(seconds)),
                    "Final test toxicity": pm_over_seeds(last.loc[key, "test_toxicity"], 3),
                    "Final test return": pm_over_seeds(last.loc[key, "test_return"], 3),
                    "Rounds to GRPO's peak": pm_over_seeds(to_peak.loc[key], 1),
                    "Kept": f"{100 * (seconds['n_kept'] / seconds['n_records']).mean():.0f} %",
                    **{f"{stage} (s)": pm_over_seeds(seconds[column], 2) for column, stage in STAGES.items()},
                    "Round (s)": pm_over_seeds(seconds["total"], 2),
                    "Influence / round": f"{100 * (seconds['time_influence'] / seconds['total']).mean():.0f} %"
                    if filtered
                    else MISSING_CELL,
                }
            )
    return pd.DataFrame(table)


OUTPUTS: tuple[Output, ...] = (
    Output(
        "grpo_tiny",
        "IIF on GRPO (tiny world)",
        "GRPO (G = 8 responses per prompt, group-normalised advantages, β = 0.04 KL to the reference, no value "
        "head) against GRPO + IIF (dropping the responses of negative f_seq influence, p = 100 %) and GRPO + "
        "random filtering (dropping as many), with a thinned group's baseline as collected or recomputed over "
        "its kept responses; 8 rounds of 64 responses, 5 seeds. Final: round 8. Rounds to GRPO's peak: the first "
        "round whose test return reaches the best standard GRPO of the same seed reached. Seconds per round of "
        "each stage (random scores influence too: it drops as many as IIF would); the runs shared the 2-core "
        "machine with other work, so seconds compare within a baseline only. Mean ± std over seeds.",
        BOTH_BASELINES,
        grpo_table,
    ),
    Output(
        "grpo_paper",
        "IIF on GRPO (GPT-Neo 2.7B)",
        "As the tiny world's table, at the paper's RLHF scale: GRPO on GPT-Neo 2.7B with LoRA, the detoxification "
        "task's prompts, reward and evaluation (env=toxicity), G = 8, against GRPO + IIF and GRPO + random; 3 seeds.",
        PAPER_SCALE,
        grpo_table,
    ),
    *(
        Output(
            f"grpo_tiny_curves_{baseline}",
            f"IIF on GRPO, baseline {baseline} (tiny world)",
            f"Training reward and test toxicity against round, GRPO, GRPO + IIF and GRPO + random, a thinned "
            f"group's baseline {'as collected' if baseline == 'collected' else 'recomputed over its kept responses'}. "
            + LM_CURVE_NOTE,
            grpo_runs(baseline),
            reward_and_toxicity,
        )
        for baseline in BASELINES
    ),
)
