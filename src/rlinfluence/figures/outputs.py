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
from rlinfluence.control.evaluation import is_eval_round
from rlinfluence.figures import paper
from rlinfluence.figures.render import figure_style
from rlinfluence.run.rundir import CLEAN, PAPER

MISSING_CELL = "—"


@dataclass(frozen=True)
class Arm:
    """A curve in a figure / a method in a table. `tag` is its run's method_tag, where "{p}"
    stands for the paper's IIF p of the environment (paper.IIF_P)."""

    label: str
    tag: str
    experiment: str | None = None  # the experiment of its runs, when not the output's (a baseline shared with it)

    def tag_for(self, env: str) -> str:
        return self.tag.format(p=format(paper.IIF_P[env], "g"))


STANDARD = Arm("Standard PPO", "ppo")
IIF = Arm("IIF", "iif-p{p}")
RANDOM = Arm("Random", "random-p{p}")
ADVANTAGE_H1 = Arm("Advantage H1", "advantage-h1-p{p}")
ADVANTAGE_H2 = Arm("Advantage H2", "advantage-h2-p{p}")
TD_ERROR = Arm("TD-error reweighting", "td_error")
# Beyond the paper (robust IIF, selection.py): the entropy guard, p=auto, and both.
IIF_GUARD = Arm("IIF + entropy guard", "iif_guard-p{p}")
IIF_AUTO = Arm("IIF, p = auto", "iif-pauto")
IIF_GUARD_AUTO = Arm("IIF + entropy guard, p = auto", "iif_guard-pauto")
ROBUST_ARMS = (IIF_GUARD, IIF_AUTO, IIF_GUARD_AUTO)
ABLATION_PS = (6.25, 12.5, 25.0, 50.0, 100.0)
IIF_AT_P = tuple(Arm(f"IIF p = {p:g} %", f"iif-p{p:g}") for p in ABLATION_PS)

MAIN_ENVS = ("frozenlake", "acrobot", "minigrid", "highway", "lunarlander", "bipedalwalker")
PROTOCOL_ENVS = ("frozenlake", "acrobot", "minigrid")
# Each part of the authors' collection alone (rundir.PROTOCOL_SWITCHES names). FrozenLake always
# starts in the same state, so repeating the seeded starts alone changes nothing there.
COLLECTION_PARTS = {"acrobot": ("abandon", "samestarts", "samenoise"), "frozenlake": ("abandon", "samenoise")}
ABLATION_ENVS = ("frozenlake", "acrobot", "minigrid", "lunarlander")
# The committed runs' evaluation where it is cheaper than the paper's (env.eval_episodes every round), the same
# for every arm and seed of an env (paper_figures/README.md, "Evaluation episodes", "Evaluation cadence").
CPU_EVALUATION = {"acrobot": "eval.episodes=100", "minigrid": "eval.episodes=100", "lunarlander": "eval.episodes=50",
                  "highway": "eval.episodes=50", "bipedalwalker": "eval.every=5 eval.episodes=50"}


def run_name(method_tag: str, protocol: str) -> str:
    """A run's method tag and protocol as its run dir names them (rundir.run_leaf, without the hash)."""
    return method_tag if protocol == CLEAN else f"{method_tag}-{protocol}"


@dataclass(frozen=True)
class Runs:
    """The runs an output needs: every arm in every env under each protocol, with at least `seeds`
    seeds in common."""

    experiment: str
    envs: tuple[str, ...]
    arms: tuple[Arm, ...]
    seeds: int
    protocols: tuple[str, ...] = (CLEAN,)  # rundir.protocol_tag values; every arm is needed under each
    overlay: str | None = None  # the +experiment overlay that makes the runs, when it is not `experiment`
    # False: exactly the first `seeds` common seeds (the paper's count, the same in every env). True:
    # `seeds` is the minimum and every common seed is used (studies that grow across sittings).
    all_seeds: bool = False

    @property
    def experiments(self) -> tuple[str, ...]:
        """The output's experiment, then those of arms shared from other experiments."""
        return tuple(dict.fromkeys([self.experiment, *(arm.experiment for arm in self.arms if arm.experiment)]))

    @property
    def command(self) -> str:
        return self._command("")

    def command_for(self, env: str) -> str:
        """The command for one env's runs, with the evaluation its committed runs used (a new seed made
        with the paper's episodes would sit beside them under the same run key)."""
        evaluation = f" {CPU_EVALUATION[env]}" if env in CPU_EVALUATION else ""
        return self._command(f" env={env}{evaluation}")

    def _command(self, overrides: str) -> str:
        overlays = [self.overlay or self.experiment, *self.experiments[1:]]
        return " && ".join(f"rlinfluence -m +experiment={overlay}{overrides}" for overlay in overlays)

    def _env_runs(self, tidy: pd.DataFrame, env: str) -> tuple[pd.DataFrame, dict[str, set], set]:
        parts, seeds = [], {}
        for arm in self.arms:
            experiment, tag = arm.experiment or self.experiment, arm.tag_for(env)
            for protocol in self.protocols:
                rows = tidy[(tidy["experiment"] == experiment) & (tidy["env"] == env)
                            & (tidy["protocol"] == protocol) & (tidy["method_tag"] == tag)]
                name = run_name(tag, protocol)
                seeds[name if experiment == self.experiment else f"{experiment}/{name}"] = set(rows["seed"])
                parts.append(rows.assign(arm=arm.label))
        return pd.concat(parts).sort_index(), seeds, set.intersection(*seeds.values())

    def shortfalls(self, tidy: pd.DataFrame) -> dict[str, str]:
        """For each environment that lacks runs, why; empty when every environment is complete."""
        lines = {}
        for env in self.envs:
            _, seeds, common = self._env_runs(tidy, env)
            if len(common) < self.seeds:
                have = ", ".join(f"{run} {len(s)}" for run, s in seeds.items())
                lines[env] = (f"{self.experiment}/{env}: needs {self.seeds} seeds run by every arm, "
                              f"has {len(common)} in common (finished seeds per run name: {have}); "
                              f"`{self.command_for(env)}`")
        return lines

    def progress(self, tidy: pd.DataFrame) -> dict[str, tuple[int, int]]:
        """Per environment: (finished runs that count towards the output, runs it needs)."""
        counts = {}
        for env in self.envs:
            _, seeds, _ = self._env_runs(tidy, env)
            counts[env] = (sum(min(len(s), self.seeds) for s in seeds.values()), self.seeds * len(seeds))
        return counts

    def restricted_to(self, envs: tuple[str, ...]) -> "Runs":
        return replace(self, envs=envs)

    def select(self, tidy: pd.DataFrame) -> pd.DataFrame:
        """The rows of the needed runs on the seeds all arms share (the first `seeds` of them unless
        `all_seeds`), with an `arm` label column."""
        parts = []
        for env in self.envs:
            rows, _, common = self._env_runs(tidy, env)
            parts.append(rows[rows["seed"].isin(sorted(common)[:None if self.all_seeds else self.seeds])])
        return pd.concat(parts, ignore_index=True)


@dataclass(frozen=True)
class Output:
    name: str  # file stem under the output dir
    title: str  # the paper's number for it, e.g. "Table 2"
    caption: str  # what is shown and how it is aggregated; written beside the output
    runs: Runs
    build: Callable[["Output", pd.DataFrame], Figure | pd.DataFrame]  # a figure or a table of strings


# ---------------------------------------------------------------- per-run quantities


def _by_round(run: pd.DataFrame) -> pd.DataFrame:
    return run.set_index("round").reindex(range(int(run["round"].max()) + 1))


def _curve(run: pd.DataFrame) -> np.ndarray:
    """Test-return curve of one run, indexed by round."""
    return _by_round(run)["test_return"].to_numpy(dtype=float)


def _curve_and_times(run: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Test-return curve and per-round training time of one run, indexed by round."""
    return _curve(run), metrics.training_time(_by_round(run))


def _final_return(run: pd.DataFrame) -> float:
    """The return of the last evaluated round."""
    return float(run.sort_values("round")["test_return"].dropna().iloc[-1])


def _by_arm(runs: pd.DataFrame) -> dict[str, pd.DataFrame]:
    return {label: run for label, run in runs.groupby("arm")}


def _efficiency(std_run: pd.DataFrame, run: pd.DataFrame) -> dict[str, float]:
    """SE_ave, SE_peak, RT_peak (%) of one run against standard PPO's run of the same seed, and SE_ave
    at evenly spaced levels (the level-list sensitivity check)."""
    (std_curve, std_times), (curve, times) = _curve_and_times(std_run), _curve_and_times(run)
    levels = metrics.level_reductions(std_curve, curve)
    return {
        "SE_ave": metrics.se_ave(std_curve, curve),
        "SE_ave_even": metrics.se_ave(std_curve, curve, metrics.even_levels),
        "SE_peak": metrics.se_peak(std_curve, curve),
        "RT_peak": metrics.rt_peak(std_curve, std_times, curve, times),
        "levels": levels.levels.size, "unreached": levels.n_unreached,
    }


def efficiency_per_seed(rows: pd.DataFrame, arms: tuple[Arm, ...]) -> pd.DataFrame:
    """SE_ave, SE_peak, RT_peak (%) of each arm against standard PPO of the same env and seed."""
    records = []
    for (env, seed), runs in rows.groupby(["env", "seed"], sort=True):
        by_arm = _by_arm(runs)
        for arm in arms:
            records.append({"env": env, "arm": arm.label, "p": by_arm[arm.label]["p"].iloc[0], "seed": seed,
                            **_efficiency(by_arm[STANDARD.label], by_arm[arm.label])})
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


def _in_paper_env_order(column: pd.Series) -> pd.Series:
    """Sort key for `sort_values`: the env column in the paper's env order, other columns as they are."""
    return column.map({env: i for i, env in enumerate(paper.ENV_ORDER)}) if column.name == "env" else column


def _pm(mean: float, spread: float, digits: int) -> str:
    return f"{mean:.{digits}f} ± {spread:.{digits}f}"


def _pm_over_seeds(values: pd.Series, digits: int) -> str:
    """Mean ± std over the seeds that have a value, saying how many have none (e.g. a time to a level
    never reached): a mean over fewer seeds than the row's must not pass for one over all of them."""
    missing = int(values.isna().sum())
    if missing == len(values):
        return f"none ({missing} of {missing} seeds)"
    # One value has no spread: the mean alone, not "± nan".
    summary = _pm(values.mean(), values.std(), digits) if len(values) - missing > 1 else f"{values.mean():.{digits}f}"
    return f"{summary} (none for {missing} of {len(values)} seeds)" if missing else summary


def _summary_rows(per_seed: pd.DataFrame, keys: list[str], columns: dict[str, str],
                  paper_values: Callable[[tuple], dict | None], digits: int, paper_seeds: int,
                  ours_only: Callable[[pd.DataFrame], dict[str, str]] = lambda group: {}) -> pd.DataFrame:
    """Rows "ours" (mean ± std over seeds) and "paper" for each key, in the paper's env order.

    `columns` maps a per-seed column to its header; `paper_values(key)` gives the paper's
    {column: (mean, ±)} for that key, or None where the paper printed nothing. `ours_only(group)`
    adds cells the paper has no counterpart for.
    """
    per_seed = per_seed.sort_values(keys, key=_in_paper_env_order)
    rows = []
    for key, group in per_seed.groupby(keys, sort=False):
        second = {} if len(key) == 1 else {"p (%)": f"{key[1]:g}"} if keys[1] == "p" else {keys[1].capitalize(): key[1]}
        key_cells = {"Env": paper.ENV_TITLES[key[0]], **second}
        ours = {header: _pm_over_seeds(group[col], digits) for col, header in columns.items()}
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
    """The output's arms in each of its envs (`curves_figure`), one line style per protocol it compares."""
    runs = output.runs
    return curves_figure(rows, runs.envs, [arm.label for arm in runs.arms], f"{output.title}: {output.caption}",
                         runs.protocols)


def curves_figure(rows: pd.DataFrame, envs: tuple[str, ...], arms: list[str], title: str,
                  protocols: tuple[str, ...] = ()) -> Figure:
    """Test return against round, one panel per env, one colour per label in `arms` (the rows' `arm`),
    mean ± 95 % t-interval over seeds; one line style per protocol when `protocols` has several."""
    ncols = min(len(envs), 3)
    nrows = -(-len(envs) // ncols)
    palette = dict(zip(arms, sns.color_palette("colorblind", len(arms))))
    dashes = dict(zip(protocols, ["", (4, 2), (1, 1), (6, 2, 1, 2), (2, 4)]))
    with figure_style():
        fig = Figure(figsize=(4.0 * ncols, 3.0 * nrows), layout="constrained")
        axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
        for ax, env in zip(axes, envs):
            style = {"style": "protocol", "style_order": list(protocols), "dashes": dashes} if len(protocols) > 1 else {}
            sns.lineplot(data=rows[rows["env"] == env].dropna(subset=["test_return"]),
                         x="round", y="test_return", hue="arm", hue_order=list(palette), palette=palette,
                         errorbar=lambda v: metrics.t_interval(v)[1:3], legend=False, ax=ax, **style)
            ax.set(title=paper.ENV_TITLES.get(env, env), xlabel="round", ylabel="test return")
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        for ax in axes[len(envs):]:
            fig.delaxes(ax)
        handles = [Line2D([], [], color=color) for color in palette.values()]
        labels = list(palette)
        if len(protocols) > 1:
            handles += [Line2D([], [], color="black", dashes=dashes[protocol] or (None, None)) for protocol in protocols]
            labels += [f"protocol {protocol}" for protocol in protocols]
        fig.legend(handles, labels, loc="outside lower center", ncols=min(len(labels), 3 * ncols), frameon=False)
        fig.suptitle(title, wrap=True)
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


# Beyond the paper: IIF under Adam with the influence Adam's step implies (influence.preconditioner=adam),
# beside Table 3's IIF with plain influence; both against the same standard PPO runs.
ADAM_ARMS = (replace(STANDARD, experiment="adam"), Arm("IIF, plain influence", IIF.tag, "adam"),
             Arm("IIF, Adam-preconditioned influence", IIF.tag))


def table3_preconditioner(output: Output, rows: pd.DataFrame) -> pd.DataFrame:
    plain = ADAM_ARMS[1].label
    return _efficiency_table(rows, ADAM_ARMS[1:], ["env", "arm"], EFFICIENCY_COLUMNS,
                             lambda key: paper.TABLE3.get(key[0]) if key[1] == plain else None, paper_seeds=3)


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


# Evaluating every k-th round (eval.every = k) is what makes Highway and BipedalWalker affordable here; this
# measures what it costs SE on the envs evaluated every round, by thinning their curves the way such a run
# would have seen them.
EVAL_CADENCES = (1, 2, 4, 10)


def _evaluated_every(curve: np.ndarray, every: int) -> np.ndarray:
    """The curve as a run with eval.every = `every` records it: NaN on the rounds it does not evaluate."""
    rounds = len(curve) - 1
    return np.array([value if is_eval_round(k, every, rounds) else np.nan for k, value in enumerate(curve)])


def eval_cadence_table(output: Output, rows: pd.DataFrame) -> pd.DataFrame:
    records = []
    for (env, seed), runs in rows.groupby(["env", "seed"], sort=True):
        by_arm = _by_arm(runs)
        std_curve, iif_curve = _curve(by_arm[STANDARD.label]), _curve(by_arm[IIF.label])
        for every in EVAL_CADENCES:
            std_seen, iif_seen = _evaluated_every(std_curve, every), _evaluated_every(iif_curve, every)
            records.append({"env": env, "seed": seed, "every": every, "run_share": every / (len(std_curve) - 1),
                            "SE_ave": metrics.se_ave(std_seen, iif_seen), "SE_peak": metrics.se_peak(std_seen, iif_seen),
                            "levels": metrics.se_levels(std_seen)[0].size})
    per_seed = pd.DataFrame(records)
    every_round = per_seed[per_seed["every"] == 1].set_index(["env", "seed"])["SE_ave"].rename("every_round")
    per_seed = per_seed.join(every_round, on=["env", "seed"])
    per_seed["shift"] = (per_seed["SE_ave"] - per_seed["every_round"]).abs()
    table = []
    for (env, every), group in per_seed.sort_values(["env", "every"], key=_in_paper_env_order).groupby(
            ["env", "every"], sort=False):
        table.append({"Env": paper.ENV_TITLES[env], "Evaluated every (rounds)": str(every),
                      "Evaluated every (% of the run)": f"{100 * group['run_share'].mean():.1f}",
                      "Seeds": str(len(group)), "Levels per seed": f"{group['levels'].mean():.1f}",
                      "SE_ave (%)": _pm_over_seeds(group["SE_ave"], 1),
                      "SE_peak (%)": _pm_over_seeds(group["SE_peak"], 1),
                      "SE_ave shift per seed, mean (max)": f"{group['shift'].mean():.1f} ({group['shift'].max():.1f})"})
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


# ---------------------------------------------------------------- our protocol against the authors'


@dataclass(frozen=True)
class Pairing:
    """A method's runs under one protocol against standard PPO's runs under another."""

    protocol: str
    std_protocol: str

    @property
    def label(self) -> str:
        return f"{self.protocol} vs PPO {self.std_protocol}"


def pairings(protocols: tuple[str, ...]) -> tuple[Pairing, ...]:
    """Each protocol against standard PPO under the same protocol; each other protocol also against
    clean standard PPO: the authors' pairing (their IIF rounds restarted, their baseline was one
    continuous SB3 run), which credits IIF with whatever the protocol itself changes."""
    same = tuple(Pairing(protocol, protocol) for protocol in protocols)
    return same + tuple(Pairing(protocol, CLEAN) for protocol in protocols if protocol != CLEAN)


def _pick(runs: pd.DataFrame, arm: Arm, protocol: str) -> pd.DataFrame:
    return runs[(runs["arm"] == arm.label) & (runs["protocol"] == protocol)]


def paired_efficiency(rows: pd.DataFrame, arm: Arm, pairing: Pairing) -> pd.DataFrame:
    """Per (env, seed): SE_ave, SE_peak, RT_peak of `arm` under pairing.protocol against standard PPO
    of the same seed under pairing.std_protocol."""
    return pd.DataFrame([{"env": env, "seed": seed,
                          **_efficiency(_pick(runs, STANDARD, pairing.std_protocol), _pick(runs, arm, pairing.protocol))}
                         for (env, seed), runs in rows.groupby(["env", "seed"], sort=True)])


def _seed_mean_curve(runs: pd.DataFrame) -> np.ndarray:
    return runs.groupby("round")["test_return"].mean().sort_index().to_numpy(dtype=float)


def protocol_table(output: Output, rows: pd.DataFrame) -> pd.DataFrame:
    """SE_ave and SE_peak of each filtering arm, per env and protocol pairing: the paper's mean ± std
    over seeds, then robust summaries (median, IQM with a bootstrap CI, the mean without the worst
    seed) and SE_ave computed once on the seed-mean curves."""
    table = []
    for env in output.runs.envs:
        env_rows = rows[rows["env"] == env]
        for pairing in pairings(output.runs.protocols):
            for arm in output.runs.arms:
                if arm.label == STANDARD.label:  # the reference (possibly shared from another experiment)
                    continue
                per_seed = paired_efficiency(env_rows, arm, pairing)
                se_ave = per_seed["SE_ave"]
                ci = metrics.bootstrap_ci(se_ave)
                pooled = metrics.se_ave(_seed_mean_curve(_pick(env_rows, STANDARD, pairing.std_protocol)),
                                        _seed_mean_curve(_pick(env_rows, arm, pairing.protocol)))
                reported = paper.FIG6B.get(env, {}).get("SE_ave") if arm == IIF else None
                table.append({
                    "Env": paper.ENV_TITLES[env], "Protocol": pairing.label, "Arm": arm.label,
                    "Seeds": str(len(per_seed)),
                    "SE_ave mean ± std": _pm_over_seeds(se_ave, 1),
                    "SE_ave median": f"{se_ave.median():.1f}",
                    "SE_ave IQM [95 % CI]": f"{ci.mean:.1f} [{ci.low:.1f}, {ci.high:.1f}]",
                    "SE_ave without worst seed": f"{metrics.mean_without_worst(se_ave):.1f}",
                    "SE_ave of seed-mean curves": f"{pooled:.1f}",
                    "SE_peak mean ± std": _pm_over_seeds(per_seed["SE_peak"], 1),
                    "SE_peak median": f"{per_seed['SE_peak'].median():.1f}",
                    "SE_ave even levels mean ± std (median)": (
                        f"{_pm_over_seeds(per_seed['SE_ave_even'], 1)} "
                        f"({per_seed['SE_ave_even'].median():.1f})"),
                    "Paper SE_ave": _pm(*reported, 1) if reported else MISSING_CELL,
                })
    return pd.DataFrame(table)


@dataclass(frozen=True)
class Failure:
    """A failed seed of the collapse tables: its test return below `below` at its last evaluated round,
    or, with `by_round`, at every round up to that one (it has not reached `below` by then)."""

    below: float
    by_round: int | None = None

    @property
    def level(self) -> str:
        return f"{self.below:g}".replace("-", "−")  # with a typographic minus, as tables and captions print it

    @property
    def criterion(self) -> str:
        if self.by_round is None:
            return f"final test return < {self.level}"
        return f"test return < {self.level} up to round {self.by_round}"

    @property
    def whose(self) -> str:
        """The criterion as a caption says which seeds fail: `Seeds whose ...`."""
        if self.by_round is None:
            return f"whose final test return stays below {self.level}"
        return f"whose test return has not reached {self.level} by round {self.by_round}"

    def failed(self, run: pd.DataFrame) -> bool:
        if self.by_round is None:
            return _final_return(run) < self.below
        return (metrics.first_round_reaching(_curve(run), self.below) or 10**9) > self.by_round


# What counts as a failed seed, per environment (paper_figures/README.md, Collapse).
COLLAPSE = {"frozenlake": Failure(0.5), "acrobot": Failure(-150.0, by_round=20)}


def collapse_table(output: Output, rows: pd.DataFrame) -> pd.DataFrame:
    """How many seeds of each arm fail (COLLAPSE), with the rate's Wilson 95 % interval."""
    table = []
    for env in output.runs.envs:
        failure = COLLAPSE[env]
        for protocol in output.runs.protocols:
            for arm in output.runs.arms:
                runs = _pick(rows[rows["env"] == env], arm, protocol)
                failed_seeds = sorted(seed for seed, run in runs.groupby("seed") if failure.failed(run))
                rate = metrics.rate_ci(len(failed_seeds), runs["seed"].nunique())
                table.append({
                    "Env": paper.ENV_TITLES[env], "Failure": failure.criterion, "Protocol": protocol, "Arm": arm.label,
                    "Failed / seeds": f"{len(failed_seeds)} / {rate.n}",
                    "Rate [95 % Wilson CI]": f"{100 * rate.mean:.0f} % [{100 * rate.low:.0f}, {100 * rate.high:.0f}]",
                    "Failed seeds": ", ".join(map(str, failed_seeds)) or MISSING_CELL,
                })
    return pd.DataFrame(table)


# ---------------------------------------------------------------- the catalogue

# Figs. 12-13 are drawn twice from the same runs: the curves and a round-savings table.
ADVANTAGE_HEURISTIC_RUNS = Runs("heuristics_advantage", ("frozenlake", "minigrid"),
                                (STANDARD, IIF, ADVANTAGE_H1, ADVANTAGE_H2), seeds=3)
TD_ERROR_RUNS = Runs("heuristics_td_error", ("frozenlake", "lunarlander"), (STANDARD, IIF, TD_ERROR), seeds=3)

# Beyond the paper: p = auto against every hand-tuned p of the p ablation, on Table 2's seeds and against
# Table 2's standard PPO runs (the same settings as the main comparison's).
AUTO_VS_P_ARMS = (replace(STANDARD, experiment="p_ablation"),
                  *(replace(arm, experiment="p_ablation") for arm in IIF_AT_P), IIF_AUTO, IIF_GUARD_AUTO)

_CURVES_NOTE = "Test return against round, mean over seeds ± 95 % t-interval."
_SE_NOTE = ("Each seed is compared with standard PPO of the same seed, then mean ± std over seeds. "
            "Levels are the running-maximum records of the standard curve after round 0; a level the "
            "method never reaches counts as 0 % ('Unreached levels' says how often).")
_RT_NOTE = "RT_peak counts collection + influence + update time, not evaluation."
_ROBUST_NOTE = ("SE as in Fig. 6b, per seed; then mean ± std over seeds (the paper's statistic), median, "
                "interquartile mean with a 95 % percentile-bootstrap CI over seeds (scipy, 10,000 resamples, "
                "fixed seed), the mean without the worst seed, and SE_ave of the seed-mean curves. Last column: "
                "SE_ave at 10 levels evenly spaced between standard PPO's initial and peak return instead of its "
                "running-maximum records (which crowd near a noisy plateau).")

OUTPUTS: tuple[Output, ...] = (
    Output("fig6a_learning_curves", "Fig. 6a",
           "IIF, standard PPO and random filtering (dropping as many records as IIF). " + _CURVES_NOTE,
           Runs("main", MAIN_ENVS, (STANDARD, IIF, RANDOM), seeds=5), learning_curves),
    Output("fig6b_efficiency", "Fig. 6b", "Training-efficiency gains of IIF. " + _SE_NOTE + " " + _RT_NOTE,
           Runs("main", MAIN_ENVS, (STANDARD, IIF), seeds=5), fig6b_table),
    # Where a noisy plateau makes most running-maximum records noise (Highway), the mean over seeds alone
    # cannot say whether a filter learns faster; the same runs' robust and even-level summaries can.
    Output("fig6b_robust", "Fig. 6b (robust)",
           "Fig. 6a/6b's runs: IIF and random filtering, each against standard PPO of the same seed. " + _ROBUST_NOTE,
           Runs("main", MAIN_ENVS, (STANDARD, IIF, RANDOM), seeds=5), protocol_table),
    Output("eval_cadence", "Evaluation cadence",
           "What evaluating only every k-th round (and the last) does to IIF's SE against standard PPO: the main "
           "comparison's every-round curves of both arms thinned to every k-th round, then SE as in Fig. 6b, mean "
           "± std over seeds; the last column is the absolute per-seed change from the every-round value.",
           Runs("main", ABLATION_ENVS, (STANDARD, IIF), seeds=5), eval_cadence_table),
    Output("table2_p_ablation", "Table 2",
           "Round savings of IIF for each drop percentage p (the paper printed no p = 6.25 row). " + _SE_NOTE,
           Runs("p_ablation", ABLATION_ENVS, (STANDARD, *IIF_AT_P), seeds=3), table2_p_ablation),
    Output("table3_adam", "Table 3",
           "Training-efficiency gains of IIF, both arms with Adam. " + _SE_NOTE + " " + _RT_NOTE,
           Runs("adam", ("minigrid", "lunarlander"), (STANDARD, IIF), seeds=3), table3_adam),
    Output("table3_adam_preconditioner", "Table 3, Adam-aware influence",
           "IIF under Adam scoring records by ⟨P ∇ℓ_i, ∇L_f⟩, P = Adam's 1/(√v̂ + ε) at θ_k (round 1: P = I, no "
           "second moment yet), against IIF with the paper's plain influence; both against the same standard PPO "
           "(Adam) runs of Table 3; paper rows: Table 3's IIF. " + _SE_NOTE + " " + _RT_NOTE,
           Runs("adam_preconditioner", ("minigrid", "lunarlander"), ADAM_ARMS, seeds=3), table3_preconditioner),
    Output("table4_final_return_ci", "Table 4",
           "95 % t-interval over seeds of the paired final-return gain IIF − standard PPO "
           "(return of each run's last evaluated round).",
           Runs("main", ("minigrid", "lunarlander", "bipedalwalker"), (STANDARD, IIF), seeds=5),
           table4_final_return_ci),
    Output("table5_runtime", "Table 5",
           "Wall-clock seconds, mean ± std over seeds. Per-round columns average the training "
           "rounds; totals are collection + influence + update without evaluation. 'To std peak' is IIF's "
           "time to reach standard PPO's peak return (none for a seed whose IIF never reaches it); RT_peak divides "
           "it by standard PPO's time to its peak (the paper divided by standard PPO's whole run).",
           Runs("main", MAIN_ENVS, (STANDARD, IIF), seeds=5), table5_runtime),
    Output("fig12_advantage_heuristics", "Fig. 12",
           "Advantage heuristics H1 and H2 (same p as IIF) against IIF and standard PPO. " + _CURVES_NOTE,
           ADVANTAGE_HEURISTIC_RUNS,
           learning_curves),
    Output("fig13_td_error", "Fig. 13",
           "TD-error (PER-style) reweighting against IIF and standard PPO. " + _CURVES_NOTE,
           TD_ERROR_RUNS,
           learning_curves),
    # The paper shows Figs. 12-13 as curves only; these tables put a number on "matches IIF" / "hurts".
    Output("fig12_efficiency", "Fig. 12, round savings",
           "Advantage heuristics H1 and H2 and IIF (same p), each against standard PPO of the same seed. "
           + _ROBUST_NOTE,
           ADVANTAGE_HEURISTIC_RUNS,
           protocol_table),
    Output("fig13_efficiency", "Fig. 13, round savings",
           "TD-error reweighting and IIF, each against standard PPO of the same seed. " + _ROBUST_NOTE,
           TD_ERROR_RUNS,
           protocol_table),
    Output("fig14_p_ablation", "Fig. 14",
           "IIF with drop percentage p against standard PPO. " + _CURVES_NOTE,
           Runs("p_ablation", ABLATION_ENVS, (STANDARD, *IIF_AT_P), seeds=3), learning_curves),
    Output("fig15_adam", "Fig. 15",
           "IIF against standard PPO, both with Adam. " + _CURVES_NOTE,
           Runs("adam", ("minigrid", "lunarlander"), (STANDARD, IIF), seeds=3), learning_curves),
    Output("protocol_comparison", "Protocols",
           "Our protocol (clean) against the authors' (paper: influence normalised per 64-record chunk, "
           "last partial minibatch dropped, every round restarted from the same seeded episode starts and "
           "action noise), each arm against standard PPO of the same seed. 'paper vs PPO clean' pairs the "
           "authors' IIF with a continuous standard run, as their numbers did. " + _ROBUST_NOTE,
           Runs("main", PROTOCOL_ENVS, (STANDARD, IIF, RANDOM), seeds=5, protocols=(CLEAN, PAPER),
                overlay="protocol", all_seeds=True), protocol_table),
    Output("protocol_comparison_lunarlander", "Protocols (LunarLander)",
           "As the protocol table, LunarLander with 5 seeds. " + _ROBUST_NOTE,
           Runs("main", ("lunarlander",), (STANDARD, IIF, RANDOM), seeds=5, protocols=(CLEAN, PAPER),
                overlay="protocol_lunarlander"), protocol_table),
    Output("protocol_curves", "Protocol curves",
           "IIF, standard PPO and random filtering under our protocol (solid) and the authors' (dashed). "
           + _CURVES_NOTE,
           Runs("main", PROTOCOL_ENVS, (STANDARD, IIF, RANDOM), seeds=5, protocols=(CLEAN, PAPER),
                overlay="protocol", all_seeds=True), learning_curves),
    *(Output(f"protocol_parts_{env}", f"Collection parts ({paper.ENV_TITLES[env]})",
             "Each part of the authors' collection alone: abandon = the unfinished episode is dropped at "
             "each round start, samestarts = every round replays the same seeded episode starts, samenoise "
             "= every round reuses the same action noise. " + _ROBUST_NOTE,
             Runs("main", (env,), (STANDARD, IIF), seeds=5, protocols=(CLEAN, *parts, PAPER),
                  overlay="protocol_parts", all_seeds=True), protocol_table)
      for env, parts in COLLECTION_PARTS.items()),
    Output("collapse_frozenlake", "Collapse rate (FrozenLake)",
           f"Seeds of IIF (p = 50 %) {COLLAPSE['frozenlake'].whose}, with the rate's Wilson 95 % interval.",
           Runs("main", ("frozenlake",), (IIF,), seeds=10, protocols=(CLEAN, PAPER), overlay="collapse",
                all_seeds=True),
           collapse_table),
    Output("collapse_acrobot", "Stuck seeds (Acrobot)",
           f"Seeds {COLLAPSE['acrobot'].whose}, with the rate's Wilson 95 % interval.",
           Runs("main", ("acrobot",), (STANDARD, IIF, RANDOM), seeds=5, protocols=(CLEAN, PAPER),
                overlay="protocol", all_seeds=True), collapse_table),
    Output("robust_collapse_frozenlake", "Robust IIF: collapse rate (FrozenLake)",
           f"Seeds {COLLAPSE['frozenlake'].whose}: plain IIF (p = 50 %) against the robust variants, "
           "our protocol, with the rate's Wilson 95 % interval.",
           Runs("main", ("frozenlake",), (IIF, *ROBUST_ARMS), seeds=30, overlay="robust_collapse", all_seeds=True),
           collapse_table),
    Output("robust_stall_acrobot", "Robust IIF: stuck seeds (Acrobot)",
           f"Seeds {COLLAPSE['acrobot'].whose}: standard PPO, plain IIF (p = 50 %) and the "
           "robust variants, our protocol, with the rate's Wilson 95 % interval.",
           Runs("main", ("acrobot",), (STANDARD, IIF, *ROBUST_ARMS), seeds=5, overlay="robust", all_seeds=True),
           collapse_table),
    Output("robust_efficiency", "Robust IIF: round savings",
           "Plain IIF at the paper's p and the robust variants, each against standard PPO of the same seed, our "
           "protocol. " + _ROBUST_NOTE,
           Runs("main", ABLATION_ENVS, (STANDARD, IIF, *ROBUST_ARMS), seeds=5, overlay="robust", all_seeds=True),
           protocol_table),
    Output("robust_auto_vs_p", "Robust IIF: p = auto against the hand-tuned p",
           "IIF with p = auto (alone and with the entropy guard) beside IIF at each p of the p ablation (Table 2), "
           "on Table 2's seeds, each against Table 2's standard PPO run of the same seed, our protocol. "
           + _ROBUST_NOTE,
           Runs("main", ABLATION_ENVS, AUTO_VS_P_ARMS, seeds=3, overlay="robust"), protocol_table),
    Output("robust_curves", "Robust IIF: curves",
           "Plain IIF at the paper's p, the robust variants and standard PPO, our protocol. " + _CURVES_NOTE,
           Runs("main", ABLATION_ENVS, (STANDARD, IIF, *ROBUST_ARMS), seeds=5, overlay="robust", all_seeds=True),
           learning_curves),
)
