"""Section 4.2's behaviour formation (Fig. 4, 10): how the records behind f_action = log π(a*|s*) change over
a run, drawn from task=timeline's CSVs."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from rlinfluence.analyses.timeline import phases, round_series
from rlinfluence.config.schema import TimelineConfig
from rlinfluence.figures import paper
from rlinfluence.figures.analysis_data import AnalysisData
from rlinfluence.figures.render import figure_style
from rlinfluence.figures.requirements import Output

# Two state features per env to show the top records in: (label, of the rows' obs_<d> columns).
STATE_AXES = {
    "acrobot": (("θ1 (rad)", lambda d: np.arctan2(d["obs_1"], d["obs_0"])), ("θ̇1 (rad/s)", lambda d: d["obs_4"])),
    # Kinematics rows [presence, x, y, vx, vy], normalised; row 1 is the nearest other vehicle, relative to the ego.
    "highway": (("nearest vehicle: Δx", lambda d: d["obs_6"]), ("nearest vehicle: Δvx", lambda d: d["obs_8"])),
}


def _shade_phases(ax, series: pd.DataFrame) -> None:
    for phase, group in series.groupby("phase"):
        ax.axvspan(
            group["round"].min() - 0.5,
            group["round"].max() + 0.5,
            color="grey",
            alpha=0.18 if phase % 2 else 0.06,
            lw=0,
        )
        # Alternate heights: a phase of a few rounds is narrower than its label.
        ax.text(
            group["round"].mean(),
            1.02 if phase % 2 else 1.09,
            f"phase {phase}",
            transform=ax.get_xaxis_transform(),
            ha="center",
            fontsize=7,
        )


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
        env, (("obs_0", lambda d: d["obs_0"]), ("obs_1", lambda d: d["obs_1"]))
    )
    colours = dict(zip(actions, sns.color_palette("colorblind", len(actions))))
    for action, records in top.groupby("action"):
        ax.scatter(x_of(records), y_of(records), s=6, color=colours[action], linewidths=0, label=f"a = {action}")
    ax.scatter(x_of(target), y_of(target), marker="*", s=90, color="black", label="s*")
    took = (top["action"] == top["target_action"]).mean()
    ax.set(
        xlabel=x_label,
        ylabel=y_label,
        title=f"rounds {top['round'].min()}–{top['round'].max()}: "
        f"{took:.0%} took a*, median ‖e − e*‖ "
        f"{top['embedding_distance'].median():.2f}",
    )
    ax.title.set_fontsize(7)


def timeline_figure(output: Output[AnalysisData], rows: pd.DataFrame) -> Figure:
    """Fig. 4 / 10: π(a*|s*) and R against round with the phases shaded; below, per phase, its top records."""
    env, seed = rows["env"].iloc[0], rows["seed"].min()
    rows = rows[rows["seed"] == seed]
    phase_of = phases(rows, output.runs.settings(env).phases)
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
        fig.legend(
            [handles[label] for label in labels],
            labels,
            loc="outside lower center",
            ncols=len(labels),
            fontsize=7,
            frameon=False,
        )
        fig.suptitle(
            f"{output.title}: {output.caption} {paper.ENV_TITLES[env]}, seed {seed}, "
            f"a* = {rows['target_action'].iloc[0]}, s* = [{', '.join(f'{v:.3g}' for v in state)}].",
            wrap=True,
        )
    return fig


_TIMELINE_NOTE = (
    "How the behaviour f_action = log π(a*|s*) forms over a standard-PPO run: π_θk(a*|s*) and the "
    "graph roughness R of the positive influence over the final network's state embedding "
    f"(u-nearest-neighbour graph) against round, cut into {TimelineConfig().phases} phases "
    "(least-squares change points of both); below, per phase, the records of highest influence of "
    "its rounds."
)

OUTPUTS: tuple[Output, ...] = tuple(
    Output(
        f"{figure}_timeline_{env}",
        title,
        _TIMELINE_NOTE,
        AnalysisData("timeline", (env,), 1, (), overrides),
        timeline_figure,
    )
    for figure, title, env, overrides in (
        ("fig10", "Fig. 10", "acrobot", "eval.episodes=100"),
        # Fig. 4 reads no test return: evaluating only the first and
        # last rounds saves Highway ~13 s a round (the training is the same)
        ("fig4", "Fig. 4", "highway", "analysis.timeline.action=4 eval.every=100"),
    )
)
