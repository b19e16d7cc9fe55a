"""Fidelity: the paper, the authors' released code and ours, side by side.

The authors' runs come from `benchmarks/authors_pipeline/` (their scripts, unmodified, converted into
tidy rows of experiment `authors`, protocol `authors`). Their IIF covers fewer rounds than our runs
(MiniGrid 20 of 40, LunarLander 100 of 150), and SE depends on the horizon, so our runs are compared
over the authors' rounds; our whole-run numbers (Fig. 6b's) sit beside them.

Alignment: round k is θ^k, the policy after k completed updates, for every arm and source. The
"shifted" alignment reads each IIF curve one round early (IIF's θ^(k+1) at round k), which is what a
plot does that puts the authors' IIF round-i file (it tests θ^(i+1)) at x = i beside their standard
test at index i (θ^i). It is measured here to say what it does, never used for a headline.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Self

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from rlinfluence import metrics
from rlinfluence.figures import paper
from rlinfluence.figures.arms import IIF, RANDOM, STANDARD, Arm
from rlinfluence.figures.control_runs import ArmRuns, Runs, cpu_eval_episodes
from rlinfluence.figures.curves import SEED_CURVES_NOTE, seed_curves
from rlinfluence.figures.formatting import MISSING_CELL, pm, pm_over_seeds
from rlinfluence.figures.quantities import by_arm, curve, final_return
from rlinfluence.figures.render import figure_style
from rlinfluence.figures.requirements import FigureData, Output, Requirement, RestrictableByEnvs
from rlinfluence.run.identity import CLEAN, PAPER

AUTHORS = "authors"  # experiment and protocol of paper_figures/data/authors.csv
FIDELITY_ENVS = ("minigrid", "lunarlander")  # the envs the authors' release covers


@dataclass(frozen=True)
class ExternalRuns(ArmRuns, RestrictableByEnvs):
    """Runs made by code other than rlinfluence's training loop (a benchmark script writes their tidy rows):
    no refresh from run dirs gathers them. A subclass says how to make them (`command_for`)."""

    experiment: str
    envs: tuple[str, ...]
    arms: tuple[Arm, ...]
    seeds: int
    protocols: tuple[str, ...]
    all_seeds: bool = False

    @property
    def experiments(self) -> tuple[str, ...]:
        return ()


@dataclass(frozen=True)
class AuthorsRuns(ExternalRuns):
    """The authors' own runs (standard PPO and IIF), made by their scripts, not by rlinfluence."""

    # Test episodes a round; None: as many as our committed runs of the env evaluate, so both sources' curves compare.
    test_episodes: int | None = None

    def episodes(self, env: str) -> int:
        return self.test_episodes or cpu_eval_episodes(env)

    def command_for(self, env: str) -> str:
        episodes = self.episodes(env)
        experiment = "" if self.experiment == AUTHORS else f" --experiment {self.experiment}"
        return (
            f"python benchmarks/authors_pipeline/driver.py run --venv <venv> --work <work> --env {env} "
            f"--seed <k> --test-episodes {episodes} && "
            f"python benchmarks/authors_pipeline/convert.py --work <work> --venv <venv>{experiment}"
        )


@dataclass(frozen=True)
class Sources:
    """Several sources' runs, drawn together: each contributes rows with a `source` label. Its envs are every
    source's, in the order the sources name them."""

    parts: tuple[tuple[str, Requirement], ...]  # (source label, its runs)

    @property
    def envs(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(env for _, runs in self.parts for env in runs.envs))

    @property
    def experiments(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(e for _, runs in self.parts for e in runs.experiments))

    def parts_of(self, env: str) -> tuple[tuple[str, Requirement], ...]:
        """The sources that cover `env`."""
        return tuple((label, runs) for label, runs in self.parts if env in runs.envs)

    @property
    def command(self) -> str:
        # Once each: sources made by one overlay's sweep (e.g. a setting swept inside it) share its command.
        return " && ".join(dict.fromkeys(runs.command for _, runs in self.parts))

    def shortfalls(self, data: FigureData) -> dict[str, str]:
        lines: dict[str, list[str]] = {}
        for _, runs in self.parts:
            for env, line in runs.shortfalls(data).items():
                lines.setdefault(env, []).append(line)
        return {env: "; ".join(parts) for env, parts in lines.items()}

    def progress(self, data: FigureData) -> dict[str, tuple[int, int]]:
        counts = [runs.progress(data) for _, runs in self.parts]
        zero = (0, 0)  # a source that does not cover the env (parts_of)
        return {
            env: (sum(c.get(env, zero)[0] for c in counts), sum(c.get(env, zero)[1] for c in counts))
            for env in self.envs
        }

    def restricted_to(self, envs: tuple[str, ...]) -> Self:
        # Each source keeps only its own envs among `envs`; one left with none is dropped (a Runs with no env
        # would fall back to its overlay's).
        parts = tuple(
            (label, runs.restricted_to(kept))
            for label, runs in self.parts
            if (kept := tuple(env for env in envs if env in runs.envs))
        )
        return replace(self, parts=parts)

    def select(self, data: FigureData) -> pd.DataFrame:
        return pd.concat([runs.select(data).assign(source=label) for label, runs in self.parts], ignore_index=True)


AUTHORS_SOURCE, OURS_SOURCE = "authors' code", "ours"
AUTHORS_RUNS = AuthorsRuns(AUTHORS, FIDELITY_ENVS, (STANDARD, IIF), seeds=5, protocols=(AUTHORS,))
THREE_WAY_RUNS = Sources(
    (
        (AUTHORS_SOURCE, AUTHORS_RUNS),
        (OURS_SOURCE, Runs("main", (STANDARD, IIF), envs_needed=FIDELITY_ENVS)),
        # The paper-protocol runs of the same envs (+experiment=protocol makes MiniGrid's too).
        (OURS_SOURCE, Runs("protocol_lunarlander", (STANDARD, IIF), envs_needed=FIDELITY_ENVS)),
    )
)


def _horizon(rows: pd.DataFrame, env: str) -> int:
    """The last round the authors' runs of `env` tested: our runs are compared over the same rounds."""
    return int(rows.loc[(rows["env"] == env) & (rows["source"] == AUTHORS_SOURCE), "round"].max())


def _shifted(curve: np.ndarray) -> np.ndarray:
    """The curve read one round early: θ^(k+1) at round k (round 0 keeps θ^0, which both arms share)."""
    return np.concatenate([curve[:1], curve[2:], [np.nan]])


def se_per_seed(
    rows: pd.DataFrame, arm_label: str, protocol: str, last_round: int | None, shift: bool = False
) -> pd.DataFrame:
    """SE_ave, SE_peak and final returns of `arm_label` against standard PPO of the same seed and protocol."""
    rows = rows[rows["protocol"] == protocol]
    if last_round is not None:
        rows = rows[rows["round"] <= last_round]
    records = []
    for seed, runs in rows.groupby("seed", sort=True):
        of_arm = by_arm(runs)
        std, run = of_arm[STANDARD.label], of_arm[arm_label]
        std_curve, run_curve = curve(std), curve(run)
        if shift:
            run_curve = _shifted(run_curve)
        records.append(
            {
                "seed": seed,
                "SE_ave": metrics.se_ave(std_curve, run_curve),
                "SE_peak": metrics.se_peak(std_curve, run_curve),
                "final_method": final_return(run),
                "final_std": final_return(std),
            }
        )
    return pd.DataFrame(records)


@dataclass(frozen=True)
class ReportedSpreads:
    """What a paper might have reported as SE_ave's "±" (the paper's LunarLander 26.0 ± 1.8 against
    19.6, the std over seeds its own code gives here). A question about reporting, not a result."""

    per_seed_mean: float  # mean over seeds of each seed's SE_ave (our tables' headline)
    per_seed_std: float  # their std over seeds (ddof 1, the ± of our tables)
    standard_error: float  # per_seed_std / √seeds
    mean_curves: metrics.ConfidenceInterval  # SE_ave of the seed-mean curves; 95 % percentile bootstrap of seeds


def reported_spreads(rows: pd.DataFrame, arm_label: str, protocol: str) -> ReportedSpreads:
    """`arm_label` against standard PPO over one env's `rows` (labelled by `arm`, as Runs.select gives
    them) of `protocol`. The seed-mean curves' bootstrap resamples seeds, each with both its arms' curves."""
    per_seed = se_per_seed(rows, arm_label, protocol, None)["SE_ave"]
    rows = rows[rows["protocol"] == protocol]
    seeds = sorted(set(rows["seed"]))
    curves = {
        label: np.stack([curve(rows[(rows["arm"] == label) & (rows["seed"] == seed)]) for seed in seeds])
        for label in (STANDARD.label, arm_label)
    }

    def mean_curves_se_ave(picked: np.ndarray) -> float:
        picked = picked.astype(int)  # bootstrap_ci resamples the seeds' indices as floats
        return metrics.se_ave(curves[STANDARD.label][picked].mean(axis=0), curves[arm_label][picked].mean(axis=0))

    std = float(per_seed.std())
    return ReportedSpreads(
        per_seed_mean=float(per_seed.mean()),
        per_seed_std=std,
        standard_error=std / np.sqrt(len(per_seed)),
        mean_curves=metrics.bootstrap_ci(np.arange(len(seeds)), mean_curves_se_ave),
    )


def robust_cells(values: pd.Series, name: str) -> dict[str, str]:
    ci = metrics.bootstrap_ci(values)
    return {
        f"{name} mean ± std": pm_over_seeds(values, 1),
        f"{name} median": f"{values.median():.1f}",
        # One seed has no interval (a study whose runs are still arriving).
        f"{name} IQM [95 % CI]": f"{ci.mean:.1f} [{ci.low:.1f}, {ci.high:.1f}]" if len(values) > 1 else MISSING_CELL,
        f"{name} per seed": ", ".join(f"{v:.1f}" for v in values),
    }


def _comparisons(rows: pd.DataFrame, env: str) -> list[tuple[str, str, pd.DataFrame, str, int | None]]:
    """(source label, rounds label, rows, protocol, last round) of each row of an env's block."""
    horizon = _horizon(rows, env)
    authors = rows[(rows["env"] == env) & (rows["source"] == AUTHORS_SOURCE)]
    ours = rows[(rows["env"] == env) & (rows["source"] == OURS_SOURCE)]
    full = int(ours["round"].max())
    return [
        (AUTHORS_SOURCE, f"0–{horizon}", authors, AUTHORS, None),
        ("ours, clean protocol", f"0–{horizon}", ours, CLEAN, horizon),
        ("ours, paper protocol", f"0–{horizon}", ours, PAPER, horizon),
        ("ours, clean protocol (Fig. 6b)", f"0–{full}", ours, CLEAN, None),
    ]


def paper_row(env: str) -> dict[str, str]:
    """The paper's Fig. 6b numbers of `env` as a row of a table comparing sources."""
    reported = paper.FIG6B[env]
    return {
        "Env": paper.ENV_TITLES[env],
        "Source": "paper",
        "Rounds": MISSING_CELL,
        "Seeds": "5",
        "SE_ave mean ± std": pm(*reported["SE_ave"], 1),
        "SE_peak mean ± std": pm(*reported["SE_peak"], 1),
    }


def source_row(env: str, source: str, rounds: str, per_seed: pd.DataFrame) -> dict[str, str]:
    """One source's IIF against its standard PPO (`se_per_seed`'s rows) as a row beside `paper_row`."""
    return {
        "Env": paper.ENV_TITLES[env],
        "Source": source,
        "Rounds": rounds,
        "Seeds": str(len(per_seed)),
        **robust_cells(per_seed["SE_ave"], "SE_ave"),
        **robust_cells(per_seed["SE_peak"], "SE_peak"),
        # Two digits: MiniGrid's returns lie in [0, 1].
        "Final return IIF": pm_over_seeds(per_seed["final_method"], 2),
        "Final return std": pm_over_seeds(per_seed["final_std"], 2),
    }


def three_way_table(output: Output[Sources], rows: pd.DataFrame) -> pd.DataFrame:
    table = []
    for env in output.runs.envs:
        table.append(paper_row(env))
        for source, rounds, source_rows, protocol, last_round in _comparisons(rows, env):
            per_seed = se_per_seed(source_rows, IIF.label, protocol, last_round)
            gaps = per_seed["final_method"] - per_seed["final_std"]
            table.append(
                source_row(env, source, rounds, per_seed)
                | {"Final IIF − std per seed": ", ".join(f"{v:.2f}" for v in gaps)}
            )
    return pd.DataFrame(table).fillna(MISSING_CELL)


def three_way_curves(output: Output[Sources], rows: pd.DataFrame) -> Figure:
    """Test return, each seed's curve under the mean over seeds and its band (`seed_curves`): authors' standard
    and IIF beside ours (clean protocol), over the authors' rounds."""
    envs = output.runs.envs
    arms = {STANDARD.label: "tab:blue", IIF.label: "tab:orange"}
    sources = {AUTHORS_SOURCE: "", OURS_SOURCE: (4, 2)}
    with figure_style():
        fig = Figure(figsize=(5.0 * len(envs), 3.4), layout="constrained")
        for ax, env in zip(fig.subplots(1, len(envs), squeeze=False).ravel(), envs):
            horizon = _horizon(rows, env)
            shown = rows[
                (rows["env"] == env) & (rows["round"] <= horizon) & rows["protocol"].isin([AUTHORS, CLEAN])
            ].dropna(subset=["test_return"])
            seed_curves(
                ax,
                shown,
                "test_return",
                hue="arm",
                hue_order=list(arms),
                palette=arms,
                style="source",
                style_order=list(sources),
                dashes=sources,
                legend=False,
            )
            ax.set(title=paper.ENV_TITLES[env], xlabel="round (θ^k: k completed updates)", ylabel="test return")
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        handles = [Line2D([], [], color=color) for color in arms.values()]
        handles += [Line2D([], [], color="black", dashes=dash or (None, None)) for dash in sources.values()]
        fig.legend(handles, [*arms, *sources], loc="outside lower center", ncols=4, frameon=False)
        fig.suptitle(f"{output.title}: {output.caption}", wrap=True)
    return fig


ALIGNMENT_ARMS = (IIF, RANDOM)


def alignment_table(output: Output[Sources], rows: pd.DataFrame) -> pd.DataFrame:
    """SE_ave per source and arm under the correct alignment and with the filtering arm read one round early."""
    table = []
    for env in output.runs.envs:
        env_rows = rows[rows["env"] == env]
        blocks: list[tuple[str, pd.DataFrame, str, tuple[Arm, ...]]] = (
            [(AUTHORS_SOURCE, env_rows[env_rows["source"] == AUTHORS_SOURCE], AUTHORS, (IIF,))]
            if AUTHORS_SOURCE in set(env_rows["source"])
            else []
        )
        ours = env_rows[env_rows["source"] == OURS_SOURCE]
        blocks += [("ours, clean protocol", ours, CLEAN, ALIGNMENT_ARMS)]
        for source, source_rows, protocol, arms in blocks:
            for arm in arms:
                if source_rows[source_rows["arm"] == arm.label].empty:
                    continue
                reported = paper.FIG6B[env]["SE_ave"] if arm == IIF else None
                cells = {}
                for alignment, shift in (("θ^k at round k", False), ("one round early", True)):
                    se_ave = se_per_seed(source_rows, arm.label, protocol, None, shift)["SE_ave"]
                    ci = metrics.bootstrap_ci(se_ave)
                    cells[f"SE_ave, {alignment}"] = (
                        f"{pm_over_seeds(se_ave, 1)}; median {se_ave.median():.1f}; "
                        f"IQM {ci.mean:.1f} [{ci.low:.1f}, {ci.high:.1f}]"
                    )
                table.append(
                    {
                        "Env": paper.ENV_TITLES[env],
                        "Source": source,
                        "Arm": arm.label,
                        "Rounds": f"0–{int(source_rows['round'].max())}",
                        "Seeds": str(source_rows["seed"].nunique()),
                        **cells,
                        "Paper SE_ave": f"{reported[0]:.1f} ± {reported[1]:.1f}" if reported else MISSING_CELL,
                    }
                )
    return pd.DataFrame(table)


ALIGNMENT_RUNS = Sources(
    (
        (AUTHORS_SOURCE, AUTHORS_RUNS),
        (OURS_SOURCE, Runs("main", (STANDARD, IIF, RANDOM), envs_needed=FIDELITY_ENVS)),
    )
)
# The main comparison's envs the authors' release does not cover.
OUR_ALIGNMENT_RUNS = Sources(
    (
        (
            OURS_SOURCE,
            Runs("main", (STANDARD, IIF, RANDOM), envs_needed=("frozenlake", "acrobot", "highway", "bipedalwalker")),
        ),
    )
)

_THREE_WAY_NOTE = (
    "Per env: the paper's Fig. 6b; the authors' released pipeline run unmodified (benchmarks/authors_pipeline/, "
    "SGD, p = 12.5 %, as many test episodes as our committed runs: MiniGrid 100, LunarLander 50); ours under the "
    "clean and the paper protocol over the authors' rounds, and over our whole run. IIF against standard PPO of "
    "the same seed and source; mean ± std over seeds (the paper's statistic), median, IQM with a 95 % "
    "percentile-bootstrap CI (scipy, 10,000 resamples), per-seed values in seed order. Final return: the last "
    "round's test return. Round k is θ^k for every arm."
)

OUTPUTS: tuple[Output, ...] = (
    Output(
        "fidelity_three_way", "Fidelity: paper | authors' code | ours", _THREE_WAY_NOTE, THREE_WAY_RUNS, three_way_table
    ),
    Output(
        "fidelity_three_way_curves",
        "Fidelity curves",
        "Test return against round (θ^k) of the authors' released pipeline (solid) and ours, clean protocol "
        f"(dashed), over the authors' rounds: {SEED_CURVES_NOTE}.",
        THREE_WAY_RUNS,
        three_way_curves,
    ),
    Output(
        "fidelity_alignment",
        "Fidelity: IIF read one round early",
        "SE_ave of each filtering arm against standard PPO of the same seed, with round k = θ^k (correct) and "
        "with the filtering arm's curve read one round early (θ^(k+1) at round k, as a plot that puts the "
        "authors' IIF round-i file beside their standard test i would). Mean ± std; median; IQM [95 % CI].",
        ALIGNMENT_RUNS,
        alignment_table,
    ),
    Output(
        "fidelity_alignment_ours",
        "Fidelity: IIF read one round early (our other envs)",
        "As the alignment table, for the main comparison's other envs (ours only: the authors' release covers "
        "MiniGrid and LunarLander).",
        OUR_ALIGNMENT_RUNS,
        alignment_table,
    ),
)
