"""The paper's figures and tables: which runs each needs, and how it is computed from them.

Each `Output` names the experiment overlay that makes its runs, the environments and arms
(methods) it compares and how many seeds it needs. An output is made only when every arm of every
environment has that many seeds in common; otherwise it is reported missing, never drawn from part
of its runs. Speed-ups pair a method with standard PPO of the same seed (same initial policy).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from rlinfluence import metrics
from rlinfluence.figures import paper
from rlinfluence.figures.render import figure_style

MISSING_CELL = "—"


@dataclass(frozen=True)
class Arm:
    """A curve in a figure / a method in a table. `tag` is its run's method_tag, where "{p}"
    stands for the paper's IIF p of the environment (paper.IIF_P)."""

    label: str
    tag: str

    def tag_for(self, env: str) -> str:
        return self.tag.format(p=format(paper.IIF_P[env], "g"))


STANDARD = Arm("Standard PPO", "ppo")
IIF = Arm("IIF", "iif-p{p}")
RANDOM = Arm("Random", "random-p{p}")
ADVANTAGE_H1 = Arm("Advantage H1", "advantage-h1-p{p}")
ADVANTAGE_H2 = Arm("Advantage H2", "advantage-h2-p{p}")
TD_ERROR = Arm("TD-error reweighting", "td_error")
ABLATION_PS = (6.25, 12.5, 25.0, 50.0, 100.0)
IIF_AT_P = tuple(Arm(f"IIF p = {p:g} %", f"iif-p{p:g}") for p in ABLATION_PS)

MAIN_ENVS = ("frozenlake", "acrobot", "minigrid", "highway", "lunarlander", "bipedalwalker")
ABLATION_ENVS = ("frozenlake", "acrobot", "minigrid", "lunarlander")


@dataclass(frozen=True)
class Runs:
    """The runs an output needs: every arm in every env, with at least `seeds` seeds in common."""

    experiment: str
    envs: tuple[str, ...]
    arms: tuple[Arm, ...]
    seeds: int
    protocol: str = "clean"  # the runs' protocol (rundir.protocol_tag): every arm under the same one

    @property
    def command(self) -> str:
        return f"rlinfluence -m +experiment={self.experiment}"

    def _env_runs(self, tidy: pd.DataFrame, env: str) -> tuple[pd.DataFrame, dict[str, set], set]:
        labels = {arm.tag_for(env): arm.label for arm in self.arms}
        rows = tidy[(tidy["experiment"] == self.experiment) & (tidy["env"] == env)
                    & (tidy["protocol"] == self.protocol) & tidy["method_tag"].isin(labels)]
        seeds = {tag: set(rows.loc[rows["method_tag"] == tag, "seed"]) for tag in labels}
        rows = rows.assign(arm=rows["method_tag"].map(labels))
        return rows, seeds, set.intersection(*seeds.values())

    def shortfalls(self, tidy: pd.DataFrame) -> dict[str, str]:
        """For each environment that lacks runs, why; empty when every environment is complete."""
        lines = {}
        for env in self.envs:
            _, seeds, common = self._env_runs(tidy, env)
            if len(common) < self.seeds:
                have = ", ".join(f"{tag} {len(s)}" for tag, s in seeds.items())
                lines[env] = (f"{self.experiment}/{env}: needs {self.seeds} seeds run by every arm, "
                              f"has {len(common)} in common (finished seeds per method_tag: {have})")
        return lines

    def restricted_to(self, envs: tuple[str, ...]) -> "Runs":
        return replace(self, envs=envs)

    def select(self, tidy: pd.DataFrame) -> pd.DataFrame:
        """The rows of the needed runs on the first `seeds` seeds all arms share, with an `arm` label
        column: every environment of an output is averaged over the same number of seeds."""
        parts = []
        for env in self.envs:
            rows, _, common = self._env_runs(tidy, env)
            parts.append(rows[rows["seed"].isin(sorted(common)[:self.seeds])])
        return pd.concat(parts, ignore_index=True)


@dataclass(frozen=True)
class Output:
    name: str  # file stem under the output dir
    title: str  # the paper's number for it, e.g. "Table 2"
    caption: str  # what is shown and how it is aggregated; written beside the output
    runs: Runs
    build: Callable[["Output", pd.DataFrame], Figure | pd.DataFrame]  # a figure or a table of strings


# ---------------------------------------------------------------- per-run quantities


def _curve_and_times(run: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Test-return curve and per-round training time of one run, indexed by round."""
    run = run.set_index("round").reindex(range(int(run["round"].max()) + 1))
    return run["test_return"].to_numpy(dtype=float), metrics.training_time(run)


def _final_return(run: pd.DataFrame) -> float:
    """The return of the last evaluated round."""
    return float(run.sort_values("round")["test_return"].dropna().iloc[-1])


def _by_arm(runs: pd.DataFrame) -> dict[str, pd.DataFrame]:
    return {label: run for label, run in runs.groupby("arm")}


def efficiency_per_seed(rows: pd.DataFrame, arms: tuple[Arm, ...]) -> pd.DataFrame:
    """SE_ave, SE_peak, RT_peak (%) of each arm against standard PPO of the same env and seed."""
    records = []
    for (env, seed), runs in rows.groupby(["env", "seed"], sort=True):
        by_arm = _by_arm(runs)
        std_curve, std_times = _curve_and_times(by_arm[STANDARD.label])
        for arm in arms:
            curve, times = _curve_and_times(by_arm[arm.label])
            levels = metrics.level_reductions(std_curve, curve)
            records.append({
                "env": env, "arm": arm.label, "p": by_arm[arm.label]["p"].iloc[0], "seed": seed,
                "SE_ave": metrics.se_ave(std_curve, curve),
                "SE_peak": metrics.se_peak(std_curve, curve),
                "RT_peak": metrics.rt_peak(std_curve, std_times, curve, times),
                "levels": levels.levels.size, "unreached": levels.n_unreached,
            })
    return pd.DataFrame(records)


def runtime_per_seed(rows: pd.DataFrame) -> pd.DataFrame:
    """Table 5's quantities for each (env, seed): per-round influence and update seconds, whole-run
    training seconds, IIF's seconds to reach the standard peak, and RT_peak."""
    records = []
    for (env, seed), runs in rows.groupby(["env", "seed"], sort=True):
        by_arm = _by_arm(runs)
        iif, std = by_arm[IIF.label], by_arm[STANDARD.label]
        (iif_curve, iif_times), (std_curve, std_times) = _curve_and_times(iif), _curve_and_times(std)
        records.append({
            "env": env, "seed": seed,
            # Round 0 only evaluates, so per-round means are over the training rounds.
            "influence_iif": iif.loc[iif["round"] >= 1, "time_influence"].mean(),
            "update_iif": iif.loc[iif["round"] >= 1, "time_update"].mean(),
            "update_std": std.loc[std["round"] >= 1, "time_update"].mean(),
            "total_iif": iif_times.sum(),
            "total_std": std_times.sum(),
            "to_peak_iif": metrics.time_to_reach(iif_curve, iif_times, metrics.standard_peak(std_curve)),
            "RT_peak": metrics.rt_peak(std_curve, std_times, iif_curve, iif_times),
        })
    return pd.DataFrame(records)


# ---------------------------------------------------------------- formatting


def _pm(mean: float, spread: float, digits: int) -> str:
    return f"{mean:.{digits}f} ± {spread:.{digits}f}"


def _summary_rows(per_seed: pd.DataFrame, keys: list[str], columns: dict[str, str],
                  paper_values: Callable[[tuple], dict | None], digits: int, paper_seeds: int,
                  ours_only: Callable[[pd.DataFrame], dict[str, str]] = lambda group: {}) -> pd.DataFrame:
    """Rows "ours" (mean ± std over seeds) and "paper" for each key, in the paper's env order.

    `columns` maps a per-seed column to its header; `paper_values(key)` gives the paper's
    {column: (mean, ±)} for that key, or None where the paper printed nothing. `ours_only(group)`
    adds cells the paper has no counterpart for.
    """
    order = {env: i for i, env in enumerate(paper.ENV_ORDER)}
    per_seed = per_seed.sort_values(keys, key=lambda s: s.map(order) if s.name == "env" else s)
    rows = []
    for key, group in per_seed.groupby(keys, sort=False):
        key_cells = {"Env": paper.ENV_TITLES[key[0]], **({"p (%)": f"{key[1]:g}"} if len(key) > 1 else {})}
        ours = {header: _pm(group[col].mean(), group[col].std(), digits) for col, header in columns.items()}
        reported = paper_values(key) or {}
        theirs = {header: _pm(*reported[col], digits) if col in reported else MISSING_CELL
                  for col, header in columns.items()}
        extra = ours_only(group)
        rows.append({**key_cells, "Source": "ours", "Seeds": str(group["seed"].nunique()), **ours, **extra})
        rows.append({**key_cells, "Source": "paper", "Seeds": str(paper_seeds), **theirs,
                     **dict.fromkeys(extra, MISSING_CELL)})
    return pd.DataFrame(rows)


EFFICIENCY_COLUMNS = {"SE_ave": "SE_ave (%)", "SE_peak": "SE_peak (%)", "RT_peak": "RT_peak (%)"}


def _efficiency_table(rows: pd.DataFrame, arms: tuple[Arm, ...], keys: list[str], columns: dict[str, str],
                      paper_values: Callable[[tuple], dict | None], paper_seeds: int) -> pd.DataFrame:
    def unreached(group: pd.DataFrame) -> dict[str, str]:
        # How often the method never reached a level (counted as 0 % reduction), over all seeds.
        return {"Unreached levels": f"{group['unreached'].sum()} / {group['levels'].sum()}"}

    return _summary_rows(efficiency_per_seed(rows, arms), keys, columns, paper_values, digits=1,
                         paper_seeds=paper_seeds, ours_only=unreached)


# ---------------------------------------------------------------- builders


def learning_curves(output: Output, rows: pd.DataFrame) -> Figure:
    """Test return against round, one panel per env, mean ± 95 % t-interval over seeds."""
    envs, arms = output.runs.envs, output.runs.arms
    ncols = min(len(envs), 3)
    nrows = -(-len(envs) // ncols)
    palette = dict(zip([arm.label for arm in arms], sns.color_palette("colorblind", len(arms))))
    with figure_style():
        fig = Figure(figsize=(4.0 * ncols, 3.0 * nrows), layout="constrained")
        axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
        for ax, env in zip(axes, envs):
            sns.lineplot(data=rows[rows["env"] == env].dropna(subset=["test_return"]),
                         x="round", y="test_return", hue="arm", hue_order=list(palette), palette=palette,
                         errorbar=lambda v: metrics.t_interval(v)[1:3], legend=False, ax=ax)
            ax.set(title=paper.ENV_TITLES[env], xlabel="round", ylabel="test return")
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        for ax in axes[len(envs):]:
            fig.delaxes(ax)
        handles = [Line2D([], [], color=color) for color in palette.values()]
        fig.legend(handles, list(palette), loc="outside lower center", ncols=len(palette), frameon=False)
        fig.suptitle(f"{output.title}: {output.caption}", wrap=True)
    return fig


def fig6b_table(output: Output, rows: pd.DataFrame) -> pd.DataFrame:
    return _efficiency_table(rows, (IIF,), ["env"], EFFICIENCY_COLUMNS,
                             lambda key: paper.FIG6B.get(key[0]), paper_seeds=5)


def table2_p_ablation(output: Output, rows: pd.DataFrame) -> pd.DataFrame:
    columns = {c: h for c, h in EFFICIENCY_COLUMNS.items() if c != "RT_peak"}
    return _efficiency_table(rows, IIF_AT_P, ["env", "p"], columns, paper.TABLE2.get, paper_seeds=3)


def table3_adam(output: Output, rows: pd.DataFrame) -> pd.DataFrame:
    return _efficiency_table(rows, (IIF,), ["env"], EFFICIENCY_COLUMNS,
                             lambda key: paper.TABLE3.get(key[0]), paper_seeds=3)


def table4_final_return_ci(output: Output, rows: pd.DataFrame) -> pd.DataFrame:
    table = []
    for env in output.runs.envs:
        finals = (rows[rows["env"] == env].groupby(["seed", "arm"])[["round", "test_return"]]
                  .apply(_final_return).unstack("arm"))
        ci = metrics.final_return_ci(finals[IIF.label], finals[STANDARD.label])
        low, high = paper.TABLE4[env]
        table.append({"Env": paper.ENV_TITLES[env], "Seeds": str(ci.n), "Mean gain": f"{ci.mean:.2f}",
                      "95 % CI (ours)": f"[{ci.low:.2f}, {ci.high:.2f}]",
                      "95 % CI (paper)": f"[{low:.2f}, {high:.2f}]"})
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


def table5_runtime(output: Output, rows: pd.DataFrame) -> pd.DataFrame:
    return _summary_rows(runtime_per_seed(rows), ["env"], TABLE5_COLUMNS,
                         lambda key: paper.TABLE5.get(key[0]), digits=2, paper_seeds=3)


# ---------------------------------------------------------------- the catalogue

_CURVES_NOTE = "Test return against round, mean over seeds ± 95 % t-interval."
_SE_NOTE = ("Each seed is compared with standard PPO of the same seed, then mean ± std over seeds. "
            "Levels are the running-maximum records of the standard curve after round 0; a level the "
            "method never reaches counts as 0 % ('Unreached levels' says how often).")
_RT_NOTE = "RT_peak counts collection + influence + update time, not evaluation."

OUTPUTS: tuple[Output, ...] = (
    Output("fig6a_learning_curves", "Fig. 6a",
           "IIF, standard PPO and random filtering (dropping as many records as IIF). " + _CURVES_NOTE,
           Runs("main", MAIN_ENVS, (STANDARD, IIF, RANDOM), seeds=5), learning_curves),
    Output("fig6b_efficiency", "Fig. 6b", "Training-efficiency gains of IIF. " + _SE_NOTE + " " + _RT_NOTE,
           Runs("main", MAIN_ENVS, (STANDARD, IIF), seeds=5), fig6b_table),
    Output("table2_p_ablation", "Table 2",
           "Round savings of IIF for each drop percentage p (the paper printed no p = 6.25 row). " + _SE_NOTE,
           Runs("p_ablation", ABLATION_ENVS, (STANDARD, *IIF_AT_P), seeds=3), table2_p_ablation),
    Output("table3_adam", "Table 3",
           "Training-efficiency gains of IIF, both arms with Adam. " + _SE_NOTE + " " + _RT_NOTE,
           Runs("adam", ("minigrid", "lunarlander"), (STANDARD, IIF), seeds=3), table3_adam),
    Output("table4_final_return_ci", "Table 4",
           "95 % t-interval over seeds of the paired final-return gain IIF − standard PPO "
           "(return of each run's last evaluated round).",
           Runs("main", ("minigrid", "lunarlander", "bipedalwalker"), (STANDARD, IIF), seeds=5),
           table4_final_return_ci),
    Output("table5_runtime", "Table 5",
           "Wall-clock seconds, mean ± std over seeds. Per-round columns average the training "
           "rounds; totals are collection + influence + update without evaluation. 'To std peak' is IIF's "
           "time to reach standard PPO's peak return; RT_peak divides it by standard PPO's time to its peak "
           "(the paper divided by standard PPO's whole run).",
           Runs("main", MAIN_ENVS, (STANDARD, IIF), seeds=5), table5_runtime),
    Output("fig12_advantage_heuristics", "Fig. 12",
           "Advantage heuristics H1 and H2 (same p as IIF) against IIF and standard PPO. " + _CURVES_NOTE,
           Runs("heuristics_advantage", ("frozenlake", "minigrid"), (STANDARD, IIF, ADVANTAGE_H1, ADVANTAGE_H2),
                seeds=3),
           learning_curves),
    Output("fig13_td_error", "Fig. 13",
           "TD-error (PER-style) reweighting against IIF and standard PPO. " + _CURVES_NOTE,
           Runs("heuristics_td_error", ("frozenlake", "lunarlander"), (STANDARD, IIF, TD_ERROR), seeds=3),
           learning_curves),
    Output("fig14_p_ablation", "Fig. 14",
           "IIF with drop percentage p against standard PPO. " + _CURVES_NOTE,
           Runs("p_ablation", ABLATION_ENVS, (STANDARD, *IIF_AT_P), seeds=3), learning_curves),
    Output("fig15_adam", "Fig. 15",
           "IIF against standard PPO, both with Adam. " + _CURVES_NOTE,
           Runs("adam", ("minigrid", "lunarlander"), (STANDARD, IIF), seeds=3), learning_curves),
)
