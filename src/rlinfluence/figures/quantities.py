"""Per-run quantities the tables summarise: curves, final returns, speed-ups against standard PPO, runtimes.

A run is its tidy rows (runs.py), one per round; rows of several runs carry an `arm` label (control_runs).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rlinfluence import metrics
from rlinfluence.figures.arms import IIF, STANDARD, Arm


def by_round(run: pd.DataFrame) -> pd.DataFrame:
    return run.set_index("round").reindex(range(int(run["round"].max()) + 1))


def curve(run: pd.DataFrame) -> np.ndarray:
    """Test-return curve of one run, indexed by round."""
    return by_round(run)["test_return"].to_numpy(dtype=float)


def curve_and_times(run: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Test-return curve and per-round training time of one run, indexed by round."""
    return curve(run), metrics.training_time(by_round(run))


def final_return(run: pd.DataFrame) -> float:
    """The return of the last evaluated round."""
    return float(run.sort_values("round")["test_return"].dropna().iloc[-1])


def by_arm(runs: pd.DataFrame) -> dict[str, pd.DataFrame]:
    return {label: run for label, run in runs.groupby("arm")}


def efficiency(std_run: pd.DataFrame, run: pd.DataFrame) -> dict[str, float]:
    """SE_ave, SE_peak, RT_peak (%) of one run against standard PPO's run of the same seed, and SE_ave
    at evenly spaced levels (the level-list sensitivity check)."""
    (std_curve, std_times), (run_curve, times) = curve_and_times(std_run), curve_and_times(run)
    levels = metrics.level_reductions(std_curve, run_curve)
    return {
        "SE_ave": metrics.se_ave(std_curve, run_curve),
        "SE_ave_even": metrics.se_ave(std_curve, run_curve, metrics.even_levels),
        "SE_peak": metrics.se_peak(std_curve, run_curve),
        "RT_peak": metrics.rt_peak(std_curve, std_times, run_curve, times),
        "levels": levels.levels.size,
        "unreached": levels.n_unreached,
    }


def efficiency_per_seed(rows: pd.DataFrame, arms: tuple[Arm, ...]) -> pd.DataFrame:
    """SE_ave, SE_peak, RT_peak (%) of each arm against standard PPO of the same env and seed."""
    records = []
    for (env, seed), runs in rows.groupby(["env", "seed"], sort=True):
        of_arm = by_arm(runs)
        for arm in arms:
            records.append(
                {
                    "env": env,
                    "arm": arm.label,
                    "p": of_arm[arm.label]["p"].iloc[0],
                    "seed": seed,
                    **efficiency(of_arm[STANDARD.label], of_arm[arm.label]),
                }
            )
    return pd.DataFrame(records)


def runtime_per_seed(rows: pd.DataFrame) -> pd.DataFrame:
    """Table 5's quantities for each (env, seed): per-round influence and update seconds, whole-run
    training seconds, IIF's seconds to reach the standard peak, and RT_peak."""
    records = []
    for (env, seed), runs in rows.groupby(["env", "seed"], sort=True):
        of_arm = by_arm(runs)
        iif, std = of_arm[IIF.label], of_arm[STANDARD.label]
        (iif_curve, iif_times), (std_curve, std_times) = curve_and_times(iif), curve_and_times(std)
        records.append(
            {
                "env": env,
                "seed": seed,
                # Round 0 only evaluates, so per-round means are over the training rounds.
                "influence_iif": iif.loc[iif["round"] >= 1, "time_influence"].mean(),
                "update_iif": iif.loc[iif["round"] >= 1, "time_update"].mean(),
                "update_std": std.loc[std["round"] >= 1, "time_update"].mean(),
                "total_iif": iif_times.sum(),
                "total_std": std_times.sum(),
                "to_peak_iif": metrics.time_to_reach(iif_curve, iif_times, metrics.standard_peak(std_curve)),
                "RT_peak": metrics.rt_peak(std_curve, std_times, iif_curve, iif_times),
            }
        )
    return pd.DataFrame(records)
