"""The paper's speed-up, final-return and runtime tables (Fig. 6b, Tables 2-5): ours beside the paper's."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from rlinfluence import metrics
from rlinfluence.figures import paper
from rlinfluence.figures.arms import ADAM_ARMS, IIF, IIF_AT_P, STANDARD, Arm
from rlinfluence.figures.control_runs import Runs
from rlinfluence.figures.formatting import MISSING_CELL, in_paper_env_order, pm, pm_over_seeds
from rlinfluence.figures.quantities import by_arm, curve, efficiency_per_seed, final_return, runtime_per_seed
from rlinfluence.figures.requirements import Output
from rlinfluence.round import is_eval_round

SE_NOTE = (
    "Each seed is compared with standard PPO of the same seed, then mean ± std over seeds. "
    "Levels are the running-maximum records of the standard curve after round 0; a level the "
    "method never reaches counts as 0 % ('Unreached levels' says how often)."
)
RT_NOTE = "RT_peak counts collection + influence + update time, not evaluation."
EFFICIENCY_COLUMNS = {"SE_ave": "SE_ave (%)", "SE_peak": "SE_peak (%)", "RT_peak": "RT_peak (%)"}


def summary_rows(
    per_seed: pd.DataFrame,
    keys: list[str],
    columns: dict[str, str],
    paper_values: Callable[[tuple], dict | None],
    digits: int,
    paper_seeds: int,
    ours_only: Callable[[pd.DataFrame], dict[str, str]] = lambda group: {},
) -> pd.DataFrame:
    """Rows "ours" (mean ± std over seeds) and "paper" for each key, in the paper's env order.

    `columns` maps a per-seed column to its header; `paper_values(key)` gives the paper's
    {column: (mean, ±)} for that key, or None where the paper printed nothing. `ours_only(group)`
    adds cells the paper has no counterpart for.
    """
    per_seed = per_seed.sort_values(keys, key=in_paper_env_order)
    rows = []
    for key, group in per_seed.groupby(keys, sort=False):
        second = {} if len(key) == 1 else {"p (%)": f"{key[1]:g}"} if keys[1] == "p" else {keys[1].capitalize(): key[1]}
        key_cells = {"Env": paper.ENV_TITLES[key[0]], **second}
        ours = {header: pm_over_seeds(group[col], digits) for col, header in columns.items()}
        reported: dict[str, tuple[float, float]] = paper_values(key) or {}
        theirs = {
            header: pm(*reported[col], digits) if col in reported else MISSING_CELL for col, header in columns.items()
        }
        extra = ours_only(group)
        rows.append({**key_cells, "Source": "ours", "Seeds": str(group["seed"].nunique()), **ours, **extra})
        rows.append(
            {**key_cells, "Source": "paper", "Seeds": str(paper_seeds), **theirs, **dict.fromkeys(extra, MISSING_CELL)}
        )
    return pd.DataFrame(rows)


def efficiency_table(
    rows: pd.DataFrame,
    arms: tuple[Arm, ...],
    keys: list[str],
    columns: dict[str, str],
    paper_values: Callable[[tuple], dict | None],
    paper_seeds: int,
) -> pd.DataFrame:
    def unreached(group: pd.DataFrame) -> dict[str, str]:
        # How often the method never reached a level (counted as 0 % reduction), over all seeds.
        return {"Unreached levels": f"{group['unreached'].sum()} / {group['levels'].sum()}"}

    return summary_rows(
        efficiency_per_seed(rows, arms),
        keys,
        columns,
        paper_values,
        digits=1,
        paper_seeds=paper_seeds,
        ours_only=unreached,
    )


def fig6b_table(output: Output[Runs], rows: pd.DataFrame) -> pd.DataFrame:
    return efficiency_table(
        rows, (IIF,), ["env"], EFFICIENCY_COLUMNS, lambda key: paper.FIG6B.get(key[0]), paper_seeds=5
    )


def table2_p_ablation(output: Output[Runs], rows: pd.DataFrame) -> pd.DataFrame:
    columns = {c: h for c, h in EFFICIENCY_COLUMNS.items() if c != "RT_peak"}
    return efficiency_table(rows, IIF_AT_P, ["env", "p"], columns, paper.TABLE2.get, paper_seeds=3)


def table3_adam(output: Output[Runs], rows: pd.DataFrame) -> pd.DataFrame:
    return efficiency_table(
        rows, (IIF,), ["env"], EFFICIENCY_COLUMNS, lambda key: paper.TABLE3.get(key[0]), paper_seeds=3
    )


def table3_preconditioner(output: Output[Runs], rows: pd.DataFrame) -> pd.DataFrame:
    plain = ADAM_ARMS[1].label
    return efficiency_table(
        rows,
        ADAM_ARMS[1:],
        ["env", "arm"],
        EFFICIENCY_COLUMNS,
        lambda key: paper.TABLE3.get(key[0]) if key[1] == plain else None,
        paper_seeds=3,
    )


def table4_final_return_ci(output: Output[Runs], rows: pd.DataFrame) -> pd.DataFrame:
    table = []
    for env in output.runs.envs:
        finals = (
            rows[rows["env"] == env]
            .groupby(["seed", "arm"])[["round", "test_return"]]
            .apply(final_return)
            .unstack("arm")
        )
        ci = metrics.final_return_ci(finals[IIF.label], finals[STANDARD.label])
        low, high = paper.TABLE4[env]
        table.append(
            {
                "Env": paper.ENV_TITLES[env],
                "Seeds": str(ci.n),
                "Mean gain": f"{ci.mean:.2f}",
                "95 % CI (ours)": f"[{ci.low:.2f}, {ci.high:.2f}]",
                "95 % CI (paper)": f"[{low:.2f}, {high:.2f}]",
            }
        )
    return pd.DataFrame(table)


# Evaluating every k-th round (eval.every = k) is what makes Highway and BipedalWalker affordable here; this
# measures what it costs SE on the envs evaluated every round, by thinning their curves the way such a run
# would have seen them.
EVAL_CADENCES = (1, 2, 4, 10)


def evaluated_every(run_curve: np.ndarray, every: int) -> np.ndarray:
    """The curve as a run with eval.every = `every` records it: NaN on the rounds it does not evaluate."""
    rounds = len(run_curve) - 1
    return np.array([value if is_eval_round(k, every, rounds) else np.nan for k, value in enumerate(run_curve)])


def eval_cadence_table(output: Output[Runs], rows: pd.DataFrame) -> pd.DataFrame:
    records = []
    for (env, seed), runs in rows.groupby(["env", "seed"], sort=True):
        of_arm = by_arm(runs)
        std_curve, iif_curve = curve(of_arm[STANDARD.label]), curve(of_arm[IIF.label])
        for every in EVAL_CADENCES:
            std_seen, iif_seen = evaluated_every(std_curve, every), evaluated_every(iif_curve, every)
            records.append(
                {
                    "env": env,
                    "seed": seed,
                    "every": every,
                    "run_share": every / (len(std_curve) - 1),
                    "SE_ave": metrics.se_ave(std_seen, iif_seen),
                    "SE_peak": metrics.se_peak(std_seen, iif_seen),
                    "levels": metrics.se_levels(std_seen)[0].size,
                }
            )
    per_seed = pd.DataFrame(records)
    every_round = per_seed[per_seed["every"] == 1].set_index(["env", "seed"])["SE_ave"].rename("every_round")
    per_seed = per_seed.join(every_round, on=["env", "seed"])
    per_seed["shift"] = (per_seed["SE_ave"] - per_seed["every_round"]).abs()
    table = []
    for (env, every), group in per_seed.sort_values(["env", "every"], key=in_paper_env_order).groupby(
        ["env", "every"], sort=False
    ):
        table.append(
            {
                "Env": paper.ENV_TITLES[env],
                "Evaluated every (rounds)": str(every),
                "Evaluated every (% of the run)": f"{100 * group['run_share'].mean():.1f}",
                "Seeds": str(len(group)),
                "Levels per seed": f"{group['levels'].mean():.1f}",
                "SE_ave (%)": pm_over_seeds(group["SE_ave"], 1),
                "SE_peak (%)": pm_over_seeds(group["SE_peak"], 1),
                "SE_ave shift per seed, mean (max)": f"{group['shift'].mean():.1f} ({group['shift'].max():.1f})",
            }
        )
    return pd.DataFrame(table)


TABLE5_COLUMNS = {
    "influence_iif": "Influence / round, IIF (s)",
    "update_iif": "Update / round, IIF (s)",
    "update_std": "Update / round, std (s)",
    "total_iif": "All rounds, IIF (s)",
    "total_std": "All rounds, std (s)",
    "to_peak_iif": "To std peak, IIF (s)",
    "RT_peak": "RT_peak (%)",
}


def table5_runtime(output: Output[Runs], rows: pd.DataFrame) -> pd.DataFrame:
    return summary_rows(
        runtime_per_seed(rows), ["env"], TABLE5_COLUMNS, lambda key: paper.TABLE5.get(key[0]), digits=2, paper_seeds=3
    )
