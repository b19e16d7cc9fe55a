"""The twenty-seed filter leaderboard: the seven arms of the benchmark of rollout filters (filters.py) on
seeds 0-19 of each env, every arm on the same seeds, trained by engine=stacked under `+experiment=twenty_seeds`.

Five seeds (filters.py) rank the filters but cannot say which differences are real. Here every filter meets
standard PPO of the same seed (the same initial policy), and IIF meets consensus and random head to head, on two
questions, each with its exact test and a CI: does the typical seed do better (P(>) over seeds, Wilcoxon signed-rank),
and is the expected outcome better (the mean difference of the area under the curve, sign-flip permutation test)?
A question is decided only when its test (Benjamini–Hochberg over the env's table) and its CI agree; else it is a tie
at the study's seeds. An env is drawn once all seven arms have their 20 seeds, as every output is; the others are
listed missing with their command.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from rlinfluence import metrics
from rlinfluence.config.compose import composed, search_path
from rlinfluence.figures import paper
from rlinfluence.figures.aggregates import (
    area_per_seed,
    arm_palette,
    improvement_table,
    iqm_curves,
    performance_profiles,
)
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
from rlinfluence.figures.control_runs import Runs
from rlinfluence.figures.formatting import MISSING_CELL, iqm_cell, pm, pm_over_seeds
from rlinfluence.figures.quantities import by_arm, curve, efficiency_per_seed, final_return
from rlinfluence.figures.render import Section, figure_style
from rlinfluence.figures.requirements import Output
from rlinfluence.run.rundir import env_folder

# The study's blocks: an env at its preset (the main comparison's settings), or a block of BLOCK_SETTINGS.
STUDY_ENVS = ("frozenlake", "acrobot", "minigrid", "lunarlander", "doorkey", "minigrid-adam", "gym-Pendulum-v1")
# The blocks whose runs are not an env's preset, and the settings their runs used, declared before any of them:
# - minigrid-adam: MiniGrid under Adam at its preset's env.lr.adam, Table 3's setting (with DoorKey's Adam preset it
#   separates the env from the optimizer); its runs sit beside MiniGrid's SGD runs, told apart by their optimizer.
# - gym-Pendulum-v1 (env=gym: its runs' env is `gym-<id>`): rl-zoo's tuned PPO entry (hyperparams/ppo.yml; SB3's
#   defaults for what it leaves out; no gSDE here), 25 rounds x 4 envs x 1,024 steps = rl-zoo's 1e5 steps.
# docs/results/index.md says where each comes from.
BLOCK_SETTINGS = {
    "minigrid-adam": "env=minigrid eval.episodes=100 optimizer=adam",
    "gym-Pendulum-v1": "env=gym env.id=Pendulum-v1 env.n_envs=4 env.n_steps=1024 env.rounds=25 ppo.gamma=0.9 "
    "ppo.gae_lambda=0.95 ppo.n_epochs=10 ppo.batch_size=64 ppo.ent_coef=0 ppo.clip_range=0.2 ppo.max_grad_norm=0.5 "
    "optimizer=adam env.lr.adam=1e-3 eval.episodes=100",
}


def block_source(block: str) -> tuple[str, str]:
    """A block's runs: their env (run dir's env folder, the tidy rows' env) and optimizer, as its settings compose."""
    cfg = composed(search_path(), tuple(BLOCK_SETTINGS.get(block, f"env={block}").split()))
    return env_folder(cfg), str(cfg.optimizer.name)


# The random arms by what they drop: as many records as IIF at the env's p, and as many as 25 % of the round's
# negative-influence records (filters.py's labels say only "Random" and "Random 25 %").
RANDOM_AS_IIF = replace(RANDOM, label="Random, as many as IIF")
RANDOM_25_OF_NEGATIVES = replace(RANDOM_25, label="Random, 25 % of negatives")
FILTER_ARMS = (IIF, RANDOM_AS_IIF, RANDOM_25_OF_NEGATIVES, CONSENSUS, IIF_EPISODES, CONSENSUS_EPISODES)
ARMS = (STANDARD, *FILTER_ARMS)
COMPARISONS: tuple[tuple[Arm, Arm], ...] = (
    *((arm, STANDARD) for arm in FILTER_ARMS),
    (IIF, CONSENSUS),
    (IIF, RANDOM_AS_IIF),
)
FDR = 0.05  # Benjamini–Hochberg's q over an env's table
PRIMARY: tuple[tuple[Arm, Arm], ...] = ((IIF, STANDARD), (IIF, CONSENSUS))  # the study's declared primary comparisons
NULL_SIMULATIONS = 400  # Monte Carlo draws of the decision rule under no difference: ±1.1 points at a 5 % rate


@dataclass(frozen=True)
class StudyRuns(Runs):
    """The study's runs: `+experiment=twenty_seeds` per env, made by engine=stacked over the overlay's seeds."""

    def command_for(self, env: str) -> str:
        """The overlay's command for the block `env` (conf/experiment/twenty_seeds.yaml): the env's committed
        evaluation (control_runs.CPU_EVALUATION) or the block's settings (BLOCK_SETTINGS), every seed of an arm
        packed into one stacked process."""
        block = self._command(f" {BLOCK_SETTINGS[env]}") if env in BLOCK_SETTINGS else super().command_for(env)
        return f"{block} engine=stacked seed='range({self.seeds})'"

    def source(self, env: str) -> tuple[str, str]:
        return block_source(env)

    @property
    def command(self) -> str:
        return " && ".join(self.command_for(env) for env in self.envs)


STUDY_RUNS = StudyRuns("twenty_seeds", ARMS, envs_needed=STUDY_ENVS)


def _p_cell(p: float, q: float) -> str:
    def number(value: float) -> str:
        return f"{value:.3f}" if value >= 0.001 else f"{value:.1e}"

    return f"{number(p)} (q {number(q)})"


def verdict(q: float, low: float, high: float, null: float, seeds: int) -> str:
    """Decided (with the side it falls on) when the test's q-value is below `FDR` and the CI excludes `null`;
    else a tie at this many seeds. A NaN bound (fewer than 2 seeds) excludes nothing."""
    if q < FDR and low > null:
        return "decided: better"
    if q < FDR and high < null:
        return "decided: worse"
    return f"tie at {seeds} seeds"


def decisions(result: metrics.PairedComparison, q_wilcoxon: float, q_flips: float) -> tuple[str, str]:
    """The two questions' verdicts of a comparison: the typical seed (P(>) against ½) and the expected outcome (the
    mean difference against 0)."""
    share, difference = result.superiority, result.difference
    return (
        verdict(q_wilcoxon, share.low, share.high, 0.5, share.n),
        verdict(q_flips, difference.low, difference.high, 0.0, difference.n),
    )


def false_decision_rates(differences: np.ndarray, seed: int = 0) -> np.ndarray:
    """How often the decision rule decides when there is no difference: `NULL_SIMULATIONS` null studies of as many
    seeds, each a resample of the observed paired `differences` with every sign flipped at random (symmetric about
    0, with the observed spread, ties and outliers), judged as a cell is but on its unadjusted p-values (BH over a
    table only raises them, so this bounds the adjusted rule's rate). The rates at which the typical seed, the
    expected outcome, and either question come out decided."""
    rng = np.random.default_rng(seed)
    n = differences.size
    decided = np.zeros((NULL_SIMULATIONS, 2), dtype=bool)
    for draw in decided:
        null = rng.choice(differences, size=n) * rng.choice([-1.0, 1.0], size=n)
        if min(metrics.wilcoxon_exact(null), metrics.sign_flip_test(null)) >= FDR:
            continue  # a tie on both questions whatever the CIs: their bootstraps (own fixed seed) are skipped
        result = metrics.paired_comparison(null, np.zeros(n))
        draw[:] = [v.startswith("decided") for v in decisions(result, result.wilcoxon_p, result.sign_flip_p)]
    return np.r_[decided.mean(axis=0), decided.any(axis=1).mean()]


def _rate(rate: float) -> str:
    interval = metrics.rate_ci(round(rate * NULL_SIMULATIONS), NULL_SIMULATIONS)
    return f"{100 * rate:.1f} % [{100 * interval.low:.1f}, {100 * interval.high:.1f}]"


def _false_decision_rows(rows: pd.DataFrame, envs: tuple[str, ...]) -> list[dict[str, str]]:
    """The primary comparisons' false-decision rates under no difference, per env (`false_decision_rates`)."""
    table = []
    for env in envs:
        for arm, other in PRIMARY:
            differences = area_per_seed(rows, env, arm.label) - area_per_seed(rows, env, other.label)
            typical, expected, either = false_decision_rates(np.asarray(differences, dtype=float))
            table.append(
                {
                    "Env": paper.ENV_TITLES.get(env, env),
                    "Method": arm.label,
                    "Against": other.label,
                    "Seeds": str(differences.size),
                    "Typical seed decided [95 % CI]": _rate(typical),
                    "Expected outcome decided [95 % CI]": _rate(expected),
                    "Either decided [95 % CI]": _rate(either),
                }
            )
    return table


def _comparison_rows(rows: pd.DataFrame, env: str) -> list[dict[str, str]]:
    """One row per comparison of the env, the tests' p-values adjusted together (Benjamini–Hochberg)."""
    areas = {arm.label: area_per_seed(rows, env, arm.label) for arm in ARMS}
    results = [metrics.paired_comparison(areas[arm.label], areas[other.label]) for arm, other in COMPARISONS]
    q = metrics.benjamini_hochberg([p for r in results for p in (r.wilcoxon_p, r.sign_flip_p)]).reshape(-1, 2)
    table = []
    for (arm, other), result, (q_wilcoxon, q_flips) in zip(COMPARISONS, results, q):
        share, difference = result.superiority, result.difference
        typical, expected = decisions(result, q_wilcoxon, q_flips)
        table.append(
            {
                "Method": arm.label,
                "Against": other.label,
                "Seeds": str(share.n),
                "P(>) [95 % CI]": f"{share.mean:.2f} [{share.low:.2f}, {share.high:.2f}]",
                "Wilcoxon p (BH q)": _p_cell(result.wilcoxon_p, q_wilcoxon),
                "Typical seed": typical,
                "Mean AUC difference [95 % CI]": f"{difference.mean:+.3f} "
                f"[{difference.low:+.3f}, {difference.high:+.3f}]",
                "Sign-flip p (BH q)": _p_cell(result.sign_flip_p, q_flips),
                "Expected outcome": expected,
            }
        )
    return table


def failed(run: pd.DataFrame, standard: pd.DataFrame) -> bool:
    """A failed seed: its final test return below its initial policy's (round 0), or it never reaches the first level
    of standard PPO's run of the same seed (its first return above round 0's, SE_ave's first level)."""
    levels, _ = metrics.se_levels(curve(standard))
    never_reached = levels.size > 0 and metrics.first_round_reaching(curve(run), levels[0]) is None
    return final_return(run) < curve(run)[0] or never_reached


def _arm_rows(rows: pd.DataFrame, env: str) -> list[dict[str, str]]:
    """One row per arm: its area under the curve, SE_ave against standard PPO of the same seed, and failed seeds."""
    env_rows = rows[rows["env"] == env]
    se = efficiency_per_seed(env_rows, FILTER_ARMS)
    runs = {seed: by_arm(seed_runs) for seed, seed_runs in env_rows.groupby("seed", sort=True)}
    table = []
    for arm in ARMS:
        areas = area_per_seed(rows, env, arm.label)
        failures = [seed for seed, of_arm in runs.items() if failed(of_arm[arm.label], of_arm[STANDARD.label])]
        se_ave = se.loc[se["arm"] == arm.label, "SE_ave"]
        table.append(
            {
                "Method": arm.label,
                "Seeds": str(len(runs)),
                "AUC mean ± std": pm(areas.mean(), areas.std(ddof=1), 3) if areas.size > 1 else f"{areas.mean():.3f}",
                "SE_ave (%) mean ± std": pm_over_seeds(se_ave, 1) if arm != STANDARD else MISSING_CELL,
                "SE_ave (%) median": f"{np.nanmedian(se_ave):.1f}" if se_ave.notna().any() else MISSING_CELL,
                "SE_ave (%) IQM [95 % CI]": iqm_cell(se_ave.dropna().to_numpy(), 1)
                if se_ave.notna().any()
                else MISSING_CELL,
                "Failed / seeds": f"{len(failures)} / {len(runs)}",
                "Failed seeds": ", ".join(map(str, failures)) or MISSING_CELL,
            }
        )
    return table


def leaderboard(output: Output[StudyRuns], rows: pd.DataFrame) -> tuple[Section, ...]:
    sections = []
    for env in output.runs.envs:
        title = paper.ENV_TITLES.get(env, env)
        sections += [
            Section(
                f"{title}: paired by seed",
                "Each filter against standard PPO of the same seed, then IIF head to head with consensus and random.",
                pd.DataFrame(_comparison_rows(rows, env)),
            ),
            Section(
                f"{title}: per arm",
                "Area under the curve, SE_ave against standard PPO of the same seed, and failed seeds.",
                pd.DataFrame(_arm_rows(rows, env)),
            ),
        ]
    sections.append(
        Section(
            "The decision rule under no difference",
            f"How often a primary comparison would be decided were there no difference ({NULL_SIMULATIONS} simulated "
            "studies per row, resampling its sign-flipped paired differences; unadjusted p-values).",
            pd.DataFrame(_false_decision_rows(rows, output.runs.envs)),
        )
    )
    return tuple(sections)


def paired_differences(output: Output[StudyRuns], rows: pd.DataFrame) -> Figure:
    """Per env, each comparison's per-seed AUC differences (a dot per seed) and their mean with its 95 % CI."""
    envs = output.runs.envs
    palette = arm_palette(ARMS)
    with figure_style():
        fig = Figure(figsize=(4.2 * len(envs), 0.45 * len(COMPARISONS) + 1.6), layout="constrained")
        axes = fig.subplots(1, len(envs), squeeze=False, sharey=True).ravel()
        for ax, env in zip(axes, envs):
            for row, (arm, other) in enumerate(COMPARISONS):
                differences = area_per_seed(rows, env, arm.label) - area_per_seed(rows, env, other.label)
                low, high = metrics.mean_band(differences)
                jitter = np.linspace(-0.2, 0.2, differences.size)
                ax.scatter(differences, row + jitter, s=9, color=palette[arm.label], alpha=0.6, linewidth=0)
                ax.errorbar(
                    differences.mean(),
                    row,
                    xerr=[[differences.mean() - low], [high - differences.mean()]],
                    fmt="D",
                    color="black",
                    markersize=4,
                    capsize=3,
                )
            ax.axvline(0.0, color="grey", linewidth=0.8)
            ax.set(title=paper.ENV_TITLES.get(env, env), xlabel="AUC difference (per seed)")
        axes[0].set_yticks(range(len(COMPARISONS)), [f"{arm.label} − {other.label}" for arm, other in COMPARISONS])
        axes[0].invert_yaxis()
        fig.suptitle(f"{output.title}: {output.caption}", wrap=True)
    return fig


_BOOTSTRAP = (
    "95 % percentile bootstrap over seeds (scipy, 10,000 resamples, fixed seed; a point when every seed agrees)"
)
OUTPUTS: tuple[Output, ...] = (
    Output(
        "twenty_seeds_leaderboard",
        "Which filter? Twenty seeds",
        "The filters' seven arms on seeds 0-19 of each env (engine=stacked, experiment twenty_seeds, the env's p; "
        "random as many as IIF drops as many records as IIF, random 25 % of negatives as many as 25 % of the round's "
        "negative-influence records), each method against the other arm's run of the same seed. Score: the area "
        "under the curve (AUC), the mean test return over rounds 1…K. The typical seed: P(>) = the share of seeds "
        f"where the method's AUC is larger (a tie counting ½), {_BOOTSTRAP}, and the two-sided exact Wilcoxon "
        "signed-rank test of the paired AUC differences (scipy, zero_method='wilcox': tied seeds dropped). The "
        f"expected outcome: the mean per-seed AUC difference, {_BOOTSTRAP}, and the two-sided exact sign-flip "
        "permutation test of it (all 2^n flips of the differences' signs for n ≤ 20 seeds; beyond, 100,000 random "
        "flips from a fixed seed). The p-values of an env's table are adjusted together by Benjamini–Hochberg "
        f"(q-values); a question is decided when its q < {FDR:g} and its CI excludes 0.5 (P) or 0 (the mean), on "
        "the side the CI says; else it is a tie at the study's seeds. Per arm: AUC mean ± std over seeds; SE_ave as "
        "in Fig. 6b against standard PPO of the same seed, mean ± std (the paper's statistic), median, and "
        f"interquartile mean [{_BOOTSTRAP}] (the 5-seed numbers: `filters_leaderboard`); a failed seed ends (last "
        "evaluated round) below its initial policy's test return (round 0), or never reaches the first "
        "level of standard PPO's run of the same seed (its first test return above round 0's). The decision rule under "
        "no difference: for each primary comparison (IIF against standard PPO and against consensus), "
        f"{NULL_SIMULATIONS} null studies of as many seeds, each a resample of its paired AUC differences with random "
        "signs, judged by the rule on unadjusted p-values (BH only raises them): the share decided, with its Wilson "
        "95 % CI.",
        STUDY_RUNS,
        leaderboard,
    ),
    Output(
        "twenty_seeds_paired_differences",
        "Which filter? Twenty seeds, seed by seed",
        "Per env, each comparison of the leaderboard: every seed's AUC difference (the method's run minus the other "
        f"arm's run of the same seed, a dot each) and their mean (diamond) with its {_BOOTSTRAP}.",
        STUDY_RUNS,
        paired_differences,
    ),
    Output(
        "twenty_seeds_improvement",
        "Which filter? Twenty seeds, across envs",
        "P(X > standard PPO) of each filter over the study's runs, as `aggregates_improvement` computes it (runs "
        "unpaired, Mann–Whitney U / n·m, ties ½; score = AUC), per env and averaged over envs, 95 % CI by a "
        "percentile bootstrap over seeds within each env (scipy, 10,000 resamples, fixed seed).",
        STUDY_RUNS,
        improvement_table,
    ),
    Output(
        "twenty_seeds_profiles",
        "Which filter? Twenty seeds, performance profiles",
        "Fraction of the study's (env, seed) runs whose SE_ave against standard PPO of the same seed exceeds τ, per "
        "filter, with a 95 % band (percentile bootstrap over seeds within each env).",
        STUDY_RUNS,
        performance_profiles,
    ),
    Output(
        "twenty_seeds_iqm_curves",
        "Which filter? Twenty seeds, IQM learning curves",
        "Interquartile mean of the test return over the study's 20 seeds at each evaluated round, per arm, with a "
        "95 % band (percentile bootstrap over seeds).",
        STUDY_RUNS,
        iqm_curves,
    ),
)
