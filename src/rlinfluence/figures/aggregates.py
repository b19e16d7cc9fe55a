"""Aggregates across envs and seeds that reviewers now expect (Agarwal et al. 2021, as the rliable
package and the Open RL Benchmark report them), for the main comparison: the probability that IIF
(or random filtering) beats standard PPO, performance profiles of per-seed SE_ave, and IQM learning
curves with bootstrap bands. The statistics live in `metrics`; this module only tabulates and draws."""

from __future__ import annotations

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from rlinfluence import metrics
from rlinfluence.figures import paper
from rlinfluence.figures.arms import IIF, RANDOM, STANDARD, Arm
from rlinfluence.figures.control_runs import Runs
from rlinfluence.figures.quantities import by_arm, curve, efficiency_per_seed
from rlinfluence.figures.render import figure_style
from rlinfluence.figures.requirements import Output

MAIN_RUNS = Runs("main", (STANDARD, IIF, RANDOM))
SE_TAUS = np.linspace(-50.0, 80.0, 131)  # SE_ave thresholds (%) of the performance profiles


def run_area(run: pd.DataFrame) -> float:
    """A run's score for P(X > Y): its mean test return over the evaluated rounds after round 0 (the
    area under its learning curve), so that learning sooner counts, not only where it ends."""
    return float(np.nanmean(curve(run)[1:]))


def area_per_seed(rows: pd.DataFrame, env: str, arm_label: str) -> np.ndarray:
    return np.array(
        [run_area(by_arm(runs)[arm_label]) for _, runs in rows[rows["env"] == env].groupby("seed", sort=True)]
    )


def arm_palette(arms) -> dict[str, tuple]:
    """One colour per arm, the same in every aggregate figure."""
    return dict(zip([arm.label for arm in arms], sns.color_palette("colorblind", len(arms))))


def filters_of(runs: Runs) -> tuple[Arm, ...]:
    """The arms that an output compares with standard PPO: its runs' arms but standard PPO."""
    return tuple(arm for arm in runs.arms if arm != STANDARD)


def improvement_table(output: Output[Runs], rows: pd.DataFrame) -> pd.DataFrame:
    envs = output.runs.envs
    table = []
    for label, env_subset in [*((paper.ENV_TITLES[env], (env,)) for env in envs), ("All envs (mean)", envs)]:
        cells = {}
        for arm in filters_of(output.runs):
            pairs = [
                (area_per_seed(rows, env, arm.label), area_per_seed(rows, env, STANDARD.label)) for env in env_subset
            ]
            ci = metrics.probability_of_improvement_ci(pairs)
            cells[f"P({arm.label} > standard) [95 % CI]"] = f"{ci.mean:.2f} [{ci.low:.2f}, {ci.high:.2f}]"
        table.append(
            {
                "Env": label,
                "Seeds per arm": str(rows[rows["env"].isin(env_subset)].groupby("env")["seed"].nunique().min()),
                **cells,
            }
        )
    return pd.DataFrame(table)


def plot_profiles(ax, per_arm: dict[str, list[np.ndarray]], taus: np.ndarray, palette: dict[str, tuple]) -> None:
    """One performance profile per arm (metrics.performance_profile of its per-env scores) with its 95 % band."""
    for label, per_env in per_arm.items():
        fraction, low, high = metrics.performance_profile(per_env, taus)
        ax.plot(taus, fraction, color=palette[label], label=label)
        ax.fill_between(taus, low, high, color=palette[label], alpha=0.2, linewidth=0)


def performance_profiles(output: Output[Runs], rows: pd.DataFrame) -> Figure:
    filters = filters_of(output.runs)
    per_seed = efficiency_per_seed(rows, filters)
    palette = arm_palette(output.runs.arms)
    with figure_style():
        fig = Figure(figsize=(5.5, 3.6), layout="constrained")
        ax = fig.subplots()
        per_arm = {
            arm.label: [
                group["SE_ave"].to_numpy()
                for _, group in per_seed[per_seed["arm"] == arm.label].groupby("env", sort=True)
            ]
            for arm in filters
        }
        plot_profiles(ax, per_arm, SE_TAUS, palette)
        ax.axvline(0.0, color="grey", linewidth=0.8)
        ax.set(xlabel="SE_ave τ (%)", ylabel="fraction of runs with SE_ave > τ", ylim=(0, 1))
        ax.legend(frameon=False)
        fig.suptitle(f"{output.title}: {output.caption}", wrap=True)
    return fig


def iqm_curves(output: Output[Runs], rows: pd.DataFrame) -> Figure:
    envs, arms = output.runs.envs, output.runs.arms
    palette = arm_palette(arms)
    ncols = min(len(envs), 3)
    nrows = -(-len(envs) // ncols)
    with figure_style():
        fig = Figure(figsize=(4.0 * ncols, 3.0 * nrows), layout="constrained")
        axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
        for ax, env in zip(axes, envs):
            for arm in arms:
                curves = np.stack(
                    [curve(by_arm(runs)[arm.label]) for _, runs in rows[rows["env"] == env].groupby("seed", sort=True)]
                )
                evaluated = ~np.isnan(curves).any(axis=0)  # eval.every > 1: only the rounds every seed evaluated
                middle, low, high = metrics.iqm_curve(curves[:, evaluated])
                rounds = np.flatnonzero(evaluated)
                ax.plot(rounds, middle, color=palette[arm.label])
                ax.fill_between(rounds, low, high, color=palette[arm.label], alpha=0.2, linewidth=0)
            ax.set(title=paper.ENV_TITLES[env], xlabel="round", ylabel="test return (IQM over seeds)")
        for ax in axes[len(envs) :]:
            fig.delaxes(ax)
        fig.legend(
            [Line2D([], [], color=color) for color in palette.values()],
            list(palette),
            loc="outside lower center",
            ncols=len(palette),
            frameon=False,
        )
        fig.suptitle(f"{output.title}: {output.caption}", wrap=True)
    return fig


_BOOTSTRAP = "percentile bootstrap over seeds within each env (scipy, 10,000 resamples, fixed seed)"
OUTPUTS: tuple[Output, ...] = (
    Output(
        "aggregates_improvement",
        "Probability of improvement",
        "P(X > standard PPO): the chance that a run of the filter, drawn at random, has a higher score than a run "
        "of standard PPO of the same env (Mann–Whitney U / n·m, ties ½); score = mean test return over rounds "
        f"1…K (area under the curve). 95 % CI: {_BOOTSTRAP}; 'All envs' averages the envs' P.",
        MAIN_RUNS,
        improvement_table,
    ),
    Output(
        "aggregates_profiles",
        "Performance profiles of SE_ave",
        "Fraction of (env, seed) runs whose SE_ave against standard PPO of the same seed exceeds τ, with a "
        f"95 % band ({_BOOTSTRAP}).",
        MAIN_RUNS,
        performance_profiles,
    ),
    Output(
        "aggregates_iqm_curves",
        "IQM learning curves",
        f"Interquartile mean of the test return over seeds at each evaluated round, with a 95 % band ({_BOOTSTRAP}).",
        MAIN_RUNS,
        iqm_curves,
    ),
)
