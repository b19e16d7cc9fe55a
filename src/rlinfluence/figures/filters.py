"""Beyond the paper: a benchmark of rollout filters under one protocol. Every filter is a selection rule
over the same round's records (selection.py): IIF, random at the env's p and at 25 %, gradient consensus (scores
against the round's own mean PPO-loss gradient), and IIF and consensus dropping whole episodes.

The main comparison's envs but Highway and BipedalWalker reuse its standard PPO, IIF and random runs
(`+experiment=main`) beside the new arms (`+experiment=filters`); DoorKey has all seven of its own
(`+experiment=filters_doorkey`). An env is drawn once every arm has its seeds, as every output is.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from rlinfluence import metrics
from rlinfluence.figures import paper
from rlinfluence.figures.aggregates import area_per_seed, arm_palette, plot_profiles
from rlinfluence.figures.arms import (
    CONSENSUS,
    CONSENSUS_EPISODES,
    IIF,
    IIF_EPISODES,
    RANDOM,
    RANDOM_25,
    STANDARD,
    Arm,
)
from rlinfluence.figures.collapse import failure, has_failure_criterion
from rlinfluence.figures.control_runs import Runs
from rlinfluence.figures.fidelity import Sources
from rlinfluence.figures.formatting import MISSING_CELL, iqm_cell
from rlinfluence.figures.quantities import by_arm, efficiency_per_seed, final_return
from rlinfluence.figures.render import figure_style
from rlinfluence.figures.requirements import Output

NEW_ARMS = (RANDOM_25, CONSENSUS, IIF_EPISODES, CONSENSUS_EPISODES)
FILTER_ARMS = (IIF, RANDOM, *NEW_ARMS)  # each scored against standard PPO of the same seed
BASELINES_FROM_MAIN = tuple(replace(arm, overlay="main") for arm in (STANDARD, IIF, RANDOM))
FILTERS_RUNS = Sources(
    (
        ("main comparison's envs", Runs("filters", (*BASELINES_FROM_MAIN, *NEW_ARMS))),
        ("DoorKey", Runs("filters_doorkey", (STANDARD, *FILTER_ARMS))),
    )
)
NORMALISED_TAUS = np.linspace(0.0, 1.0, 101)  # thresholds of the profiles' per-env normalised area


def _poi_cell(pairs: list[tuple[np.ndarray, np.ndarray]]) -> str:
    ci = metrics.probability_of_improvement_ci(pairs)
    return f"{ci.mean:.2f} [{ci.low:.2f}, {ci.high:.2f}]"


def _training_rounds(run: pd.DataFrame) -> pd.DataFrame:
    return run[run["round"] >= 1]  # round 0 only evaluates the initial policy


def _per_run(rows: pd.DataFrame, env: str, label: str) -> pd.DataFrame:
    """One row per seed of an arm in an env: its final return, whether it failed, the share of records it kept, and
    its training seconds per round (collection + influence + update, evaluation excluded)."""
    criterion = failure(env) if has_failure_criterion(env) else None
    records = []
    for seed, runs in rows[rows["env"] == env].groupby("seed", sort=True):
        run = by_arm(runs)[label]
        trained = _training_rounds(run)
        records.append(
            {
                "seed": seed,
                "final": final_return(run),
                "failed": criterion.failed(run) if criterion else None,
                "kept": trained["n_kept"].sum() / trained["n_records"].sum(),
                "seconds": metrics.training_time(trained).mean(),
            }
        )
    return pd.DataFrame(records)


def _row(
    env: str | None, arm: Arm, se: np.ndarray, pairs: list[tuple[np.ndarray, np.ndarray]], runs: pd.DataFrame
) -> dict[str, str]:
    """One leaderboard row from an arm's per-seed SE_ave, its (method, standard) areas per env and `_per_run`'s
    rows; `env` None is the all-envs row, which has no return or seconds (those of different envs do not add up)."""
    failed, one_env = runs["failed"].dropna(), env is not None
    return {
        "Env": paper.ENV_TITLES.get(env, env) if env is not None else "All envs",
        "Method": arm.label,
        "Seeds": str(len(runs)),
        "SE_ave median": f"{np.median(se):.1f}" if se.size else MISSING_CELL,
        "SE_ave IQM [95 % CI]": iqm_cell(se, 1) if se.size else MISSING_CELL,
        "P(> standard), AUC [95 % CI]": _poi_cell(pairs) if arm != STANDARD else MISSING_CELL,
        "Final return, median": f"{runs['final'].median():.2f}" if one_env else MISSING_CELL,
        "Failed / seeds": f"{int(failed.sum())} / {len(failed)}" if len(failed) else MISSING_CELL,
        "Kept %": f"{100 * runs['kept'].mean():.1f}" if one_env else MISSING_CELL,
        "s / round": f"{runs['seconds'].mean():.2f}" if one_env else MISSING_CELL,
    }


def leaderboard(output: Output[Sources], rows: pd.DataFrame) -> pd.DataFrame:
    envs = output.runs.envs
    per_seed = efficiency_per_seed(rows, FILTER_ARMS)

    def row(env: str | None, arm: Arm) -> dict[str, str]:
        covered = envs if env is None else (env,)
        se = per_seed[(per_seed["arm"] == arm.label) & per_seed["env"].isin(covered)]["SE_ave"].to_numpy()
        pairs = [(area_per_seed(rows, e, arm.label), area_per_seed(rows, e, STANDARD.label)) for e in covered]
        return _row(env, arm, se, pairs, pd.concat([_per_run(rows, e, arm.label) for e in covered]))

    every_env = [row(env, arm) for env in envs for arm in (STANDARD, *FILTER_ARMS)]
    return pd.DataFrame(every_env + [row(None, arm) for arm in FILTER_ARMS])


def normalised_areas(rows: pd.DataFrame, envs: tuple[str, ...]) -> dict[str, list[np.ndarray]]:
    """Per arm, one array per env of its per-seed areas, min-max normalised over every run of that env (all arms
    and seeds): 0 is the env's worst run, 1 its best, so envs of different return scales share one axis."""
    arms = (STANDARD, *FILTER_ARMS)
    normalised: dict[str, list[np.ndarray]] = {arm.label: [] for arm in arms}
    for env in envs:
        areas = {arm.label: area_per_seed(rows, env, arm.label) for arm in arms}
        low, high = min(a.min() for a in areas.values()), max(a.max() for a in areas.values())
        for label, values in areas.items():
            normalised[label].append((values - low) / (high - low) if high > low else np.zeros_like(values))
    return normalised


def profiles(output: Output[Sources], rows: pd.DataFrame) -> Figure:
    palette = arm_palette((STANDARD, *FILTER_ARMS))
    with figure_style():
        fig = Figure(figsize=(6.0, 4.0), layout="constrained")
        ax = fig.subplots()
        plot_profiles(ax, normalised_areas(rows, output.runs.envs), NORMALISED_TAUS, palette)
        ax.set(xlabel="normalised area under the curve τ", ylabel="fraction of runs with score > τ", ylim=(0, 1))
        ax.legend(frameon=False, fontsize="small")
        fig.suptitle(f"{output.title}: {output.caption}", wrap=True)
    return fig


_BOOTSTRAP = "percentile bootstrap over seeds (scipy, 10,000 resamples, fixed seed)"
OUTPUTS: tuple[Output, ...] = (
    Output(
        "filters_leaderboard",
        "Which filter?",
        "Rollout filters against standard PPO of the same seed, at the main comparison's settings (each env's p; "
        "random 25 % drops as many records as IIF at 25 % would). SE_ave as in Fig. 6b, per seed: median and "
        f"interquartile mean [95 % CI, {_BOOTSTRAP}]. P(> standard): the chance that a run of the method beats a run "
        "of standard PPO on the area under the curve (mean test return over rounds 1…K; Mann–Whitney U / n·m), "
        f"95 % CI by a stratified {_BOOTSTRAP}; 'All envs' averages the envs' P and pools the (env, seed) SE_ave. "
        "Final return: the last evaluated round's. Failed: the collapse tables' criterion (conf/config.yaml, "
        "figures.collapse), where an env has one. Kept %: records kept over all training rounds (the episode "
        "variants round to whole episodes, so they may keep more than p says). s / round: training seconds "
        "(collection + influence + update) per round, mean over seeds; the main comparison's runs were timed in "
        "other sittings, under other load, so compare seconds only between arms made together "
        "(`python benchmarks/round_speed.py --filters` times every arm in one invocation).",
        FILTERS_RUNS,
        leaderboard,
    ),
    Output(
        "filters_profiles",
        "Which filter? Performance profiles",
        "Fraction of (env, seed) runs of each method whose area under the curve (mean test return over rounds 1…K), "
        "min-max normalised per env over every run of that env, exceeds τ, with a 95 % band (stratified "
        f"{_BOOTSTRAP}). A curve above another everywhere is the better method on these envs.",
        FILTERS_RUNS,
        profiles,
    ),
)
