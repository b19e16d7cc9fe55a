"""Section 4's figures and tables, drawn from the analyses' own tidy CSVs (analyses/), not from runs.

`AnalysisData` stands where an `Output` of outputs.py has its `Runs`: it says which CSVs the output
reads (`<data_dir>/analyses/<analysis>/*.csv`, one per env and seed), which envs, seeds and rounds make
it complete, and the command that writes them. Only CSVs whose identity (the .json beside each) is that
command's are drawn.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd
import seaborn as sns
from gymnasium.envs.toy_text.frozen_lake import MAPS
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle
from scipy.stats import spearmanr

from rlinfluence.analyses.bottom_frames import read_frames
from rlinfluence.analyses.intervene import p_variant
from rlinfluence.analyses.standard_run import ANALYSES, analysis_identity
from rlinfluence.analyses.timeline import phases, round_series
from rlinfluence.envs.make import STATE_SETTERS, make_env

from rlinfluence.figures import paper
from rlinfluence.figures.outputs import CPU_EVALUATION, Output
from rlinfluence.figures.gather import difference, read_identity
from rlinfluence.figures.render import figure_style
from rlinfluence.run.rundir import compose_config, preset

DATA_DIR = "data_dir"  # the key of the tidy table's attrs that regenerate.py fills with figures.data_dir


@lru_cache(maxsize=None)
def documented_identity(analysis: str, env: str, overrides: str, variant: str) -> dict:
    """The identity of the analysis output an output documents: that of its command (`task=<analysis>
    env=<env> <overrides>`); seed 0 stands for every seed, whose identities share one hash."""
    cfg = compose_config([f"task={analysis}", f"env={env}", *overrides.split()])
    return analysis_identity(cfg, analysis, variant)


@dataclass(frozen=True)
class AnalysisData:
    """The rows of one analysis an output needs: `seeds` seeds of each env, with every round in `rounds`."""

    analysis: str  # diagnose | intervene | timeline (the task that writes the CSVs)
    envs: tuple[str, ...]
    seeds: int
    rounds: tuple[int, ...] = ()
    overrides: str = ""  # what the command needs beyond task, env and seed
    env_overrides: tuple[tuple[str, str], ...] = ()  # (env, overrides) for envs whose command differs
    # (env, suffix of its files after `<env>-seed<k>`, as write_rows names a variant's, e.g. `-p12.5`); others: none
    variants: tuple[tuple[str, str], ...] = ()
    experiments = ()  # reads no run's tidy rows (regenerate.py refreshes those of the outputs' experiments)
    suffix = ".csv"  # the analysis' files, and how to read one
    read = staticmethod(pd.read_csv)

    @property
    def command(self) -> str:
        """One `-m` command per distinct overrides, over the envs that share them."""
        own, envs_by_overrides = dict(self.env_overrides), {}
        for env in self.envs:
            envs_by_overrides.setdefault(own.get(env, self.overrides), []).append(env)
        return " && ".join(f"rlinfluence -m task={self.analysis} env={','.join(envs)} "
                           f"seed={','.join(map(str, range(self.seeds)))}{' ' + overrides if overrides else ''}"
                           for overrides, envs in envs_by_overrides.items())

    def overrides_for(self, env: str) -> str:
        return dict(self.env_overrides).get(env, self.overrides)

    def _files(self, tidy: pd.DataFrame) -> tuple[list[Path], dict[str, list[str]]]:
        """The CSVs of this output's envs made with the settings of its command (their identity's), and per
        env the others with the first setting in which each differs: those are never drawn."""
        suffixes, files, others = dict(self.variants), [], {}
        for path in sorted((Path(tidy.attrs[DATA_DIR]) / ANALYSES / self.analysis).glob(f"*{self.suffix}")):
            env = path.stem.split("-seed")[0]
            if env not in self.envs or not re.fullmatch(rf".+-seed\d+{re.escape(suffixes.get(env, ''))}", path.stem):
                continue
            documented = documented_identity(self.analysis, env, self.overrides_for(env), suffixes.get(env, ""))
            identity = read_identity(path)
            if identity is not None and identity["config_hash"] == documented["config_hash"]:
                files.append(path)
            else:
                others.setdefault(env, []).append(f"{path.name}: {difference(identity, documented)}")
        return files, others

    def table(self, tidy: pd.DataFrame) -> pd.DataFrame:
        files, _ = self._files(tidy)
        return pd.concat([self.read(path) for path in files], ignore_index=True) if files else pd.DataFrame(
            columns=["env", "seed", "round"])

    def _seeds(self, rows: pd.DataFrame, env: str) -> list[int]:
        rows = rows[rows["env"] == env]
        return sorted(seed for seed, run in rows.groupby("seed") if set(self.rounds) <= set(run["round"]))

    def shortfalls(self, tidy: pd.DataFrame) -> dict[str, str]:
        rows, (_, others) = self.table(tidy), self._files(tidy)
        rounds = f" with rounds {', '.join(map(str, self.rounds))}" if self.rounds else ""
        return {env: f"analyses/{self.analysis}/{env}: needs {self.seeds} seeds{rounds}, has {len(seeds)}" + (
                    f"; not drawn, made with other settings than its command: {'; '.join(others[env])}"
                    if env in others else "")
                for env in self.envs if len(seeds := self._seeds(rows, env)) < self.seeds}

    def progress(self, tidy: pd.DataFrame) -> dict[str, tuple[int, int]]:
        """Per environment: (seeds analysed with every round, seeds the output needs)."""
        rows = self.table(tidy)
        return {env: (min(len(self._seeds(rows, env)), self.seeds), self.seeds) for env in self.envs}

    def restricted_to(self, envs: tuple[str, ...]) -> "AnalysisData":
        return replace(self, envs=envs)

    def select(self, tidy: pd.DataFrame) -> pd.DataFrame:
        rows = self.table(tidy)
        parts = [rows[(rows["env"] == env) & rows["seed"].isin(self._seeds(rows, env)[:self.seeds])]
                 for env in self.envs]
        return pd.concat(parts, ignore_index=True)


def documented_identities(data_dir: Path, outputs) -> dict[Path, dict]:
    """Each analysis CSV under `data_dir` whose (analysis, env, variant) an output of `outputs` reads, with the
    identity of that output's command for its seed: the identity of CSVs made before analyses carried one
    (paper_figures/backfill_config_hash.py). Outputs reading the same CSVs must document the same command."""
    documented = {}
    for data in (output.runs for output in outputs if isinstance(output.runs, AnalysisData)):
        for env in data.envs:
            variant = dict(data.variants).get(env, "")
            identity = documented_identity(data.analysis, env, data.overrides_for(env), variant)
            if documented.setdefault((data.analysis, env, variant), identity) != identity:
                raise ValueError(f"outputs reading analyses/{data.analysis}/{env}-seed<k>{variant}.csv document "
                                 f"different commands")
    found = {}
    for path in sorted(p for p in (Path(data_dir) / ANALYSES).glob("*/*") if p.suffix in (".csv", ".npz")):
        env, seed, variant = re.fullmatch(r"(.+)-seed(\d+)(.*)", path.stem).groups()
        if (path.parent.name, env, variant) in documented:
            found[path] = documented[path.parent.name, env, variant] | {"seed": int(seed)}
    return found


# ---------------------------------------------------------------- diagnosis (Fig. 3, 8)

DIAGNOSED_ROUND = 5  # the paper's k for Fig. 3
FIG8_ROUNDS = (2, 5, 10)
ARROWS = {0: (-1, 0), 1: (0, 1), 2: (1, 0), 3: (0, -1)}  # FrozenLake actions left, down, right, up as (dx, dy)
SIGN_COLOURS = {"Â > 0": "tab:blue", "Â < 0": "tab:red"}


def _frozenlake_grid(ax, title: str) -> None:
    desc = MAPS["4x4"]
    colours = {"H": "#6e6e6e", "G": "#f2c14e", "S": "#d9d9d9", "F": "#f7f7f7"}
    for row, line in enumerate(desc):
        for col, cell in enumerate(line):
            ax.add_patch(Rectangle((col, row), 1, 1, facecolor=colours[cell], edgecolor="grey"))
            if cell in "HG":
                ax.text(col + 0.12, row + 0.22, cell, fontsize=7)
    ax.set(xlim=(0, 4), ylim=(4, 0), aspect="equal", xticks=[], yticks=[], title=title)
    ax.grid(False)


def _bottom_arrows(ax, records: pd.DataFrame) -> None:
    """The bottom records per (state, action): an arrow from the cell, width by count, colour by sign(Â)."""
    grouped = records.groupby(["state", "action"]).agg(count=("record", "size"), gae=("advantage_gae", "mean"))
    most = grouped["count"].max()
    for (state, action), group in grouped.iterrows():
        row, col = divmod(int(state), 4)
        dx, dy = ARROWS[int(action)]
        colour = SIGN_COLOURS["Â > 0" if group["gae"] > 0 else "Â < 0"]
        ax.arrow(col + 0.5, row + 0.5, 0.32 * dx, 0.32 * dy, width=0.02 + 0.1 * group["count"] / most,
                 length_includes_head=True, color=colour, alpha=0.85)


def _arrow_legend(fig: Figure) -> None:
    fig.legend([Patch(color=c) for c in SIGN_COLOURS.values()], list(SIGN_COLOURS), loc="outside lower center",
               ncols=2, frameon=False)


def bottom_records_grid(output: Output, rows: pd.DataFrame) -> Figure:
    """Fig. 3a / 8: one panel per (round, seed) of the bottom records on the 4×4 map."""
    rounds = output.runs.rounds
    seeds = sorted(rows["seed"].unique())
    with figure_style():
        fig = Figure(figsize=(2.4 * len(seeds), 2.5 * len(rounds) + 0.6), layout="constrained")
        axes = fig.subplots(len(rounds), len(seeds), squeeze=False)
        for ax_row, k in zip(axes, rounds):
            for ax, seed in zip(ax_row, seeds):
                run = rows[(rows["seed"] == seed) & (rows["round"] == k)]
                _frozenlake_grid(ax, f"round {k}, seed {seed}")
                _bottom_arrows(ax, run.nlargest(paper.FIG3_BOTTOM_RECORDS, "rank"))
        _arrow_legend(fig)
        fig.suptitle(f"{output.title}: {output.caption}", wrap=True)
    return fig


MINIGRID_ACTIONS = ("left", "right", "forward", "pickup", "drop", "toggle", "done")
VIEWS_PER_SEED = 8


def _egocentric_view(env, state: int) -> np.ndarray:
    """What the agent sees in the MiniGrid pose `state` (the view is a function of the pose in Empty-8x8)."""
    env.reset(seed=0)
    STATE_SETTERS["minigrid_pose"](env, state)
    return env.unwrapped.get_pov_render(tile_size=8)


def bottom_views(output: Output, rows: pd.DataFrame) -> Figure:
    """Fig. 3b / 9: the egocentric views of the most negative-influence records, one row per seed."""
    rows = rows[rows["round"] == DIAGNOSED_ROUND]
    seeds = sorted(rows["seed"].unique())
    env = make_env(preset("minigrid").env)
    with figure_style():
        fig = Figure(figsize=(1.3 * VIEWS_PER_SEED, 1.5 * len(seeds) + 0.8), layout="constrained")
        axes = fig.subplots(len(seeds), VIEWS_PER_SEED, squeeze=False)
        for ax_row, seed in zip(axes, seeds):
            bottom = rows[rows["seed"] == seed].nlargest(VIEWS_PER_SEED, "rank")
            for ax, record in zip(ax_row, bottom.itertuples()):
                ax.imshow(_egocentric_view(env, int(record.state)))
                ax.set(xticks=[], yticks=[], title=f"seed {seed}: {MINIGRID_ACTIONS[record.action]}\n"
                                                   f"Â {record.advantage_gae:.2f}, Ā {record.advantage_true:.2f}")
                ax.title.set_fontsize(6)
                ax.grid(False)
        fig.suptitle(f"{output.title}: {output.caption}", wrap=True)
    env.close()
    return fig


# ---------------------------------------------------------------- bottom frames (Fig. 9, Pong)


@dataclass(frozen=True)
class FrameData(AnalysisData):
    """task=bottom_frames' rows: NPZ files, as a record's frames do not fit a CSV row."""

    suffix = ".npz"
    read = staticmethod(read_frames)


FRAMES_ROUND = 15  # k of the short Pong run below (the paper gives none for Fig. 9)
# The short run: 15 rounds of 1,024 records, at the preset's start-of-run lr and clip range (its linear decay
# over 9,766 rounds leaves them at 99.8 % by round 15; over env.rounds=15 it would take them to 0), and one
# evaluation episode at the last round (none is read here).
_FRAMES_RUN = (f"env.rounds={FRAMES_ROUND} ppo.lr_schedule=constant ppo.clip_range_schedule=constant "
               f"eval.every=1000 eval.episodes=1 eval.n_parallel=1 analysis.bottom_frames.rounds=[{FRAMES_ROUND}]")
# ALE's Pong actions; the agent's paddle is the right one, which RIGHT moves up and LEFT down.
PONG_ACTIONS = ("NOOP", "FIRE", "RIGHT (up)", "LEFT (down)", "RIGHTFIRE (up)", "LEFTFIRE (down)")
RECORDS_PER_ROW = 2


def bottom_frames_figure(output: Output, rows: pd.DataFrame) -> Figure:
    """Fig. 9 (Pong): each record's stacked frames, oldest first, the most negative influence first."""
    rows = rows[rows["round"] == FRAMES_ROUND].sort_values(["seed", "influence"])
    panel_rows = -(-len(rows) // RECORDS_PER_ROW)
    with figure_style():
        fig = Figure(figsize=(3.9 * RECORDS_PER_ROW, 1.25 * panel_rows + 0.7), layout="constrained")
        for panel, record in zip(fig.subfigures(panel_rows, RECORDS_PER_ROW, squeeze=False).ravel(),
                                 rows.itertuples()):
            frames = record.obs
            for ax, age, frame in zip(panel.subplots(1, len(frames)), range(1 - len(frames), 1), frames):
                ax.imshow(frame, cmap="gray", vmin=0, vmax=255)
                ax.set(xticks=[], yticks=[])
                ax.set_xlabel(f"t−{-age}" if age else "t", fontsize=6)
                ax.grid(False)
            panel.suptitle(f"seed {record.seed}, rank {record.rank}/{record.n_records}: I = {record.influence:.3g}, "
                           f"{PONG_ACTIONS[record.action]}, Â {record.advantage_gae:.2f}", fontsize=7)
        fig.suptitle(f"{output.title}: {output.caption}", wrap=True)
    return fig


def _diagnosed(rows: pd.DataFrame) -> pd.DataFrame:
    return rows[rows["round"] == DIAGNOSED_ROUND].assign(
        error=lambda d: (d["advantage_true"] - d["advantage_gae"]).abs(),
        product=lambda d: d["advantage_true"] * d["advantage_gae"],
        agree=lambda d: np.where(np.sign(d["advantage_true"]) == np.sign(d["advantage_gae"]), "signs agree",
                                 "signs differ"))


def _shade_ends(ax, n_records: int) -> None:
    for start in (0, 0.8 * n_records):
        ax.axvspan(start, start + 0.2 * n_records, color="grey", alpha=0.15, lw=0)


def _per_seed_panels(output: Output, rows: pd.DataFrame, draw) -> Figure:
    rows = _diagnosed(rows)
    seeds = sorted(rows["seed"].unique())
    with figure_style():
        fig = Figure(figsize=(3.6 * len(seeds), 3.0), layout="constrained")
        for ax, seed in zip(fig.subplots(1, len(seeds), squeeze=False).ravel(), seeds):
            run = rows[rows["seed"] == seed]
            draw(ax, run)
            _shade_ends(ax, len(run))
            ax.set_xlabel("rank by decreasing influence")
        fig.suptitle(f"{output.title}: {output.caption}", wrap=True)
    return fig


def advantage_error(output: Output, rows: pd.DataFrame) -> Figure:
    """Fig. 3c: |Ā − Â| against rank, coloured by whether the signs agree."""
    def draw(ax, run):
        sns.scatterplot(data=run, x="rank", y="error", hue="agree", hue_order=["signs agree", "signs differ"],
                        s=6, linewidth=0, ax=ax, legend=run["seed"].iloc[0] == rows["seed"].min())
        ax.set(title=f"seed {run['seed'].iloc[0]}", ylabel="|Ā − Â|")

    return _per_seed_panels(output, rows, draw)


def spearman(run: pd.DataFrame) -> float:
    return float(spearmanr(run["rank"], run["product"]).statistic)


def advantage_product(output: Output, rows: pd.DataFrame) -> Figure:
    """Fig. 3d: Ā·Â against rank, with the Spearman correlation of the two."""
    def draw(ax, run):
        ax.scatter(run["rank"], run["product"], s=4, color="tab:purple", linewidths=0)
        ax.set(title=f"seed {run['seed'].iloc[0]}: Spearman {spearman(run):.2f}", ylabel="Ā · Â")

    return _per_seed_panels(output, rows, draw)


def spearman_table(output: Output, rows: pd.DataFrame) -> pd.DataFrame:
    """Spearman(rank, Ā·Â) per env and seed at round 5, their mean ± std, and the paper's."""
    lines = []
    for env, env_rows in _diagnosed(rows).groupby("env", sort=False):
        values = [spearman(run) for _, run in env_rows.groupby("seed")]
        per_seed = ", ".join(f"{v:.2f}" for v in values)
        paper_value = paper.FIG3D_SPEARMAN.get(env)
        lines.append({"env": paper.ENV_TITLES[env], "records per seed": str(len(env_rows) // len(values)),
                      "Spearman per seed": per_seed,
                      "ours (mean ± std)": f"{np.mean(values):.2f} ± {np.std(values, ddof=1):.2f}",
                      "paper": f"{paper_value:.2f}" if paper_value is not None else "—"})
    return pd.DataFrame(lines)


# ---------------------------------------------------------------- single-round intervention (Fig. 5, 11)

ARM_LABELS = {"influence": "drop all negative influence", "random": "drop as many at random"}


def iif_p(env: str) -> float:
    """The env's IIF p (its preset's env.p), the share of negative records an IIF round drops."""
    return float(preset(env).env.p)


def arm_label(arm: str, p: float) -> str:
    """The arm's label; rows written before `analysis.intervene.p` existed dropped all negatives (p = 100)."""
    return f"drop {p:g} % of negative influence (IIF's p)" if arm == "influence" and p < 100 else ARM_LABELS[arm]


def deltas(rows: pd.DataFrame) -> pd.DataFrame:
    """Δreturn = test(arm) − test(all records), per env, seed, round and dropping arm."""
    wide = rows.pivot_table(index=["env", "seed", "round"], columns="arm", values="test_return")
    long = wide[list(ARM_LABELS)].sub(wide["all"], axis=0).reset_index()
    return long.melt(id_vars=["env", "seed", "round"], var_name="arm", value_name="delta")


def drop_share(rows: pd.DataFrame, env: str) -> float:
    """p of the env's intervention rows (100: all negatives, also for rows written before the column)."""
    return float(rows.loc[rows["env"] == env].get("p", pd.Series([100.0])).fillna(100.0).iloc[0])


def _delta_boxes(output: Output, rows: pd.DataFrame, arms: tuple[str, ...]) -> Figure:
    data = deltas(rows)
    data = data[data["arm"].isin(arms)].assign(arm=lambda d: d["arm"].map(ARM_LABELS))
    envs = output.runs.envs
    with figure_style():
        fig = Figure(figsize=(7.5, 2.6 * len(envs) + 0.5), layout="constrained")
        for ax, env in zip(fig.subplots(len(envs), 1, squeeze=False).ravel(), envs):
            rounds = sorted(data.loc[data["env"] == env, "round"].unique())
            # Rounds as category labels in numeric order (seaborn would otherwise warn and sort them as text).
            sns.boxplot(data=data[data["env"] == env].astype({"round": str}), x="round", y="delta", hue="arm",
                        order=[str(k) for k in rounds], hue_order=[ARM_LABELS[a] for a in arms], fliersize=1.5,
                        linewidth=0.6, ax=ax, legend=env == envs[0] and len(arms) > 1)
            ax.axhline(0, color="black", lw=0.6)
            ax.set(title=paper.ENV_TITLES[env], ylabel="Δ test return")
            for label in ax.get_xticklabels():  # beyond 15 rounds, every 5th: 50 labels do not fit
                label.set_visible(len(rounds) <= 15 or int(label.get_text()) % 5 == 0)
        fig.suptitle(f"{output.title}: {output.caption}", wrap=True)
    return fig


def fig5_boxes(output: Output, rows: pd.DataFrame) -> Figure:
    return _delta_boxes(output, rows, ("influence",))


def fig11_boxes(output: Output, rows: pd.DataFrame) -> Figure:
    return _delta_boxes(output, rows, ("influence", "random"))


def _delta_summary(delta: pd.Series) -> dict[str, str]:
    return {"share Δ > 0": f"{(delta > 0).mean():.0%}", "share Δ < 0": f"{(delta < 0).mean():.0%}",
            "share Δ > 0 of Δ ≠ 0": f"{(delta > 0).sum() / max((delta != 0).sum(), 1):.0%}",
            "median Δ": f"{delta.median():.3g}", "mean Δ": f"{delta.mean():.3g}"}


def intervention_table(output: Output, rows: pd.DataFrame) -> pd.DataFrame:
    """Per env and arm, over (round, seed) pairs: the shares with Δ > 0 and Δ < 0 (a converged policy
    often gives Δ = 0 exactly), the median and mean Δ."""
    data = deltas(rows)
    lines = []
    for env in output.runs.envs:
        for arm in ARM_LABELS:
            part = data[(data["env"] == env) & (data["arm"] == arm)]
            lines.append({"env": paper.ENV_TITLES[env], "arm": arm_label(arm, drop_share(rows, env)),
                          "seeds": str(part["seed"].nunique()),
                          "rounds": str(part["round"].nunique())} | _delta_summary(part["delta"]))
    return pd.DataFrame(lines)


# ---------------------------------------------------------------- behaviour formation (Fig. 4, 10)

# Two state features per env to show the top records in: (label, of the rows' obs_<d> columns).
STATE_AXES = {
    "acrobot": (("θ1 (rad)", lambda d: np.arctan2(d["obs_1"], d["obs_0"])), ("θ̇1 (rad/s)", lambda d: d["obs_4"])),
    # Kinematics rows [presence, x, y, vx, vy], normalised; row 1 is the nearest other vehicle, relative to the ego.
    "highway": (("nearest vehicle: Δx", lambda d: d["obs_6"]), ("nearest vehicle: Δvx", lambda d: d["obs_8"])),
}


def _shade_phases(ax, series: pd.DataFrame) -> None:
    for phase, group in series.groupby("phase"):
        ax.axvspan(group["round"].min() - 0.5, group["round"].max() + 0.5, color="grey",
                   alpha=0.18 if phase % 2 else 0.06, lw=0)
        # Alternate heights: a phase of a few rounds is narrower than its label.
        ax.text(group["round"].mean(), 1.02 if phase % 2 else 1.09, f"phase {phase}",
                transform=ax.get_xaxis_transform(), ha="center", fontsize=7)


def _timeline_curves(ax, series: pd.DataFrame) -> None:
    _shade_phases(ax, series)
    ax.plot(series["round"], series["pi_target"], color="tab:blue", marker="o", ms=2.5)
    ax.set(xlabel="round", ylabel="π(a*|s*)", ylim=(0, 1.02))
    ax.yaxis.label.set_color("tab:blue")
    roughness = ax.twinx()
    roughness.plot(series["round"], series["roughness"], color="tab:orange", marker="s", ms=2.5)
    roughness.set_ylabel("graph roughness R", color="tab:orange")
    roughness.grid(False)


def _phase_records(ax, top: pd.DataFrame, env: str, target: pd.Series, actions: list[int]) -> None:
    """The phase's top records in two state features, coloured by the action taken; s* as a star."""
    (x_label, x_of), (y_label, y_of) = STATE_AXES.get(
        env, (("obs_0", lambda d: d["obs_0"]), ("obs_1", lambda d: d["obs_1"])))
    colours = dict(zip(actions, sns.color_palette("colorblind", len(actions))))
    for action, records in top.groupby("action"):
        ax.scatter(x_of(records), y_of(records), s=6, color=colours[action], linewidths=0, label=f"a = {action}")
    ax.scatter(x_of(target), y_of(target), marker="*", s=90, color="black", label="s*")
    took = (top["action"] == top["target_action"]).mean()
    ax.set(xlabel=x_label, ylabel=y_label, title=f"rounds {top['round'].min()}–{top['round'].max()}: "
                                                  f"{took:.0%} took a*, median ‖e − e*‖ "
                                                  f"{top['embedding_distance'].median():.2f}")
    ax.title.set_fontsize(7)


def timeline_figure(output: Output, rows: pd.DataFrame) -> Figure:
    """Fig. 4 / 10: π(a*|s*) and R against round with the phases shaded; below, per phase, its top records."""
    env, seed = rows["env"].iloc[0], rows["seed"].min()
    rows = rows[rows["seed"] == seed]
    phase_of = phases(rows, paper.FIG4_PHASES)
    series = round_series(rows).assign(phase=lambda d: d["round"].map(phase_of)).sort_values("round")
    top = rows.assign(phase=rows["round"].map(phase_of))
    state = json.loads(rows["target_state"].iloc[0])
    target = pd.Series({f"obs_{d}": v for d, v in enumerate(state)})
    n_phases = int(series["phase"].max())
    with figure_style():
        fig = Figure(figsize=(3.2 * max(n_phases, 2), 6.0), layout="constrained")
        grid = fig.add_gridspec(2, n_phases)
        _timeline_curves(fig.add_subplot(grid[0, :]), series)
        actions = sorted(top["action"].unique())
        for phase in range(1, n_phases + 1):
            ax = fig.add_subplot(grid[1, phase - 1])
            _phase_records(ax, top[top["phase"] == phase], env, target, actions)
        # One legend for every phase: a phase's own handles would list only the actions its records took.
        handles = {label: handle for ax in fig.axes for handle, label in zip(*ax.get_legend_handles_labels())}
        labels = [label for label in [f"a = {action}" for action in actions] + ["s*"] if label in handles]
        fig.legend([handles[label] for label in labels], labels, loc="outside lower center", ncols=len(labels),
                   fontsize=7, frameon=False)
        fig.suptitle(f"{output.title}: {output.caption} {paper.ENV_TITLES[env]}, seed {seed}, "
                     f"a* = {rows['target_action'].iloc[0]}, s* = [{', '.join(f'{v:.3g}' for v in state)}].",
                     wrap=True)
    return fig


_BOTTOM_NOTE = (f"The {paper.FIG3_BOTTOM_RECORDS} records of most negative influence (f_return) in the buffer of a standard-PPO "
                f"run, per (state, action) as arrows on the 4×4 map (width: how many; colour: sign of their "
                f"mean GAE advantage Â).")
_RANK_NOTE = (f"Records of round {DIAGNOSED_ROUND}'s buffer of a standard-PPO run, ranked by decreasing "
              f"influence (f_return); Ā = Q^π − V^π of θ_{DIAGNOSED_ROUND} by Monte-Carlo rollouts, Â = GAE. "
              f"Top and bottom 20 % shaded.")
_INTERVENE_NOTE = ("From each round's θ_k and optimizer state of a standard-PPO run, one update on the same "
                   "buffer; Δ = test return after the update minus that after the update on all records "
                   "(same evaluation episodes); one box per round over seeds.")
_DIAGNOSE_ROUNDS = "analysis.diagnose.rounds=[2,5,10]"
# MiniGrid: round 5 only and 100 rollouts per (pose, action), 100 evaluation episodes (~13 min a seed here).
_DIAGNOSE_MINIGRID = "eval.episodes=100 analysis.diagnose.rounds=[5] analysis.diagnose.rollouts=100"
_DIAGNOSE = {"frozenlake": _DIAGNOSE_ROUNDS, "minigrid": _DIAGNOSE_MINIGRID}
# Evaluation episodes as in the main reproduction (reproduce_cpu.sh); FrozenLake keeps its preset's 1,000.
_INTERVENE_EPISODES = tuple((env, CPU_EVALUATION[env]) for env in ("acrobot", "minigrid", "lunarlander"))


def _intervened_at_iif_p(envs: tuple[str, ...]) -> AnalysisData:
    """task=intervene with analysis.intervene.p at each env's IIF p: its command and its `-p<p>` files."""
    episodes = dict(_INTERVENE_EPISODES)
    return AnalysisData("intervene", envs, 3, env_overrides=tuple(
        (env, f"{episodes.get(env, '')} analysis.intervene.p={iif_p(env):g}".strip()) for env in envs),
                        variants=tuple((env, p_variant(iif_p(env))) for env in envs))


_TIMELINE_NOTE = ("How the behaviour f_action = log π(a*|s*) forms over a standard-PPO run: π_θk(a*|s*) and the "
                  "graph roughness R of the positive influence over the final network's state embedding "
                  "(u-nearest-neighbour graph) against round, cut into 3 phases (least-squares change points "
                  "of both); below, per phase, the records of highest influence of its rounds.")

OUTPUTS: tuple[Output, ...] = (
    Output("fig3a_bottom_records", "Fig. 3a", _BOTTOM_NOTE + f" Round {DIAGNOSED_ROUND}.",
           AnalysisData("diagnose", ("frozenlake",), 3, (DIAGNOSED_ROUND,), _DIAGNOSE_ROUNDS), bottom_records_grid),
    Output("fig8_bottom_records_rounds", "Fig. 8", _BOTTOM_NOTE + " Rounds 2, 5 and 10.",
           AnalysisData("diagnose", ("frozenlake",), 3, FIG8_ROUNDS, _DIAGNOSE_ROUNDS), bottom_records_grid),
    Output("fig3b_bottom_views_minigrid", "Fig. 3b, 9",
           f"The egocentric views of the {VIEWS_PER_SEED} records of most negative influence (f_return) in round "
           f"{DIAGNOSED_ROUND}'s buffer of a standard-PPO run on MiniGrid, with the action taken, its GAE "
           f"advantage Â and true advantage Ā.",
           AnalysisData("diagnose", ("minigrid",), 3, (DIAGNOSED_ROUND,), _DIAGNOSE_MINIGRID), bottom_views),
    Output("fig9_bottom_frames_pong", "Fig. 9 (Pong)",
           f"The stacked frames (t−3 … t, as the policy sees them) of the records of most negative influence "
           f"(f_return) in round {FRAMES_ROUND}'s buffer of a short standard-PPO run on Pong, with the action "
           f"taken and its GAE advantage Â.",
           FrameData("bottom_frames", ("pong",), 1, (FRAMES_ROUND,), _FRAMES_RUN), bottom_frames_figure),
    *(Output(f"fig3c_advantage_error_{env}", f"Fig. 3c ({paper.ENV_TITLES[env]})",
             "|Ā − Â| against rank. " + _RANK_NOTE,
             AnalysisData("diagnose", (env,), 3, (DIAGNOSED_ROUND,), _DIAGNOSE[env]), advantage_error)
      for env in ("frozenlake", "minigrid")),
    *(Output(f"fig3d_advantage_product_{env}", f"Fig. 3d ({paper.ENV_TITLES[env]})",
             "Ā·Â against rank, Spearman correlation per seed. " + _RANK_NOTE,
             AnalysisData("diagnose", (env,), 3, (DIAGNOSED_ROUND,), _DIAGNOSE[env]), advantage_product)
      for env in ("frozenlake", "minigrid")),
    Output("diagnosis_spearman", "Fig. 3d (Spearman)",
           f"Spearman correlation of rank by decreasing influence and Ā·Â at round {DIAGNOSED_ROUND}, per seed.",
           AnalysisData("diagnose", ("frozenlake", "minigrid"), 3, (DIAGNOSED_ROUND,), _DIAGNOSE_ROUNDS,
                        (("minigrid", _DIAGNOSE_MINIGRID),)),
           spearman_table),
    Output("fig5_intervention", "Fig. 5", "Dropping all negative-influence records of one round. " + _INTERVENE_NOTE,
           AnalysisData("intervene", ("frozenlake", "acrobot"), 3, env_overrides=_INTERVENE_EPISODES), fig5_boxes),
    Output("fig11_intervention_random", "Fig. 11",
           "Influence-guided against random dropping of as many records. " + _INTERVENE_NOTE,
           AnalysisData("intervene", ("frozenlake", "acrobot", "minigrid", "lunarlander"), 3,
                        env_overrides=_INTERVENE_EPISODES), fig11_boxes),
    Output("intervention_summary", "Fig. 5/11 (summary)",
           "Δreturn of one round's update without the dropped records, against the update on all records.",
           AnalysisData("intervene", ("frozenlake", "acrobot", "minigrid", "lunarlander"), 3,
                        env_overrides=_INTERVENE_EPISODES), intervention_table),
    Output("intervention_at_iif_p", "Fig. 5/11 at IIF's p (beyond the paper)",
           "As the summary, but each round drops only the share of its negative-influence records that an IIF "
           "round drops (the env's p), not all of them.",
           _intervened_at_iif_p(("frozenlake", "acrobot", "minigrid", "lunarlander")), intervention_table),
    *(Output(f"{figure}_timeline_{env}", title, _TIMELINE_NOTE, AnalysisData("timeline", (env,), 1, (), overrides),
             timeline_figure)
      for figure, title, env, overrides in (("fig10", "Fig. 10", "acrobot", "eval.episodes=100"),
                                            # Fig. 4 reads no test return: evaluating only the first and
                                            # last rounds saves Highway ~13 s a round (the training is the same)
                                            ("fig4", "Fig. 4", "highway", "analysis.timeline.action=4 eval.every=100"))),
)
