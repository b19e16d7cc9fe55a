"""Beyond the paper: does influence predict removal? Drawn from task=counterfactual's CSVs alone
(analyses/counterfactual.py says what each column is and how the predictions are made)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator
from scipy.stats import pearsonr, spearmanr

from rlinfluence.figures import paper
from rlinfluence.figures.analysis_data import AnalysisData
from rlinfluence.figures.formatting import MISSING_CELL
from rlinfluence.figures.render import figure_style
from rlinfluence.figures.requirements import Output

PREDICTIONS = {"predicted_plain": "plain prediction", "predicted_centred": "centred prediction"}
SET_LABELS = {"iif": "IIF drop set", "all_negative": "all negative"}
MARKERS = {"random": "o", "iif": "X", "all_negative": "s"}


def _correlation(x: pd.Series, y: pd.Series, method) -> str:
    """A correlation to two decimals; "—" where it is undefined (fewer than 3 points, or a constant)."""
    if len(x) < 3 or x.nunique() < 2 or y.nunique() < 2:
        return MISSING_CELL
    return f"{method(x, y).statistic:.2f}"


def _scale(predicted: pd.Series, actual: pd.Series) -> str:
    """The least-squares slope of actual on predicted through 0: 1 when the first-order scale is right."""
    return f"{(predicted * actual).sum() / (predicted**2).sum():.2f}" if (predicted != 0).any() else MISSING_CELL


def _group_label(kind: str, size: float) -> str:
    return f"random {size:.0%}" if kind == "random" else SET_LABELS[kind]


def removal_correlations(rows: pd.DataFrame) -> pd.DataFrame:
    """Per env and group size (random groups), and for the IIF and all-negative sets: how the actual Δf of
    removing the group correlates with each prediction (over every group, round and seed), the fitted
    scale actual/prediction, and how the test-return change correlates with the centred prediction."""
    rows = rows[rows["kind"] != "none"]
    table = []
    for (env, kind), part in rows.groupby(["env", "kind"], sort=False):
        by_size = part.groupby("size") if kind == "random" else [(part["size"].mean(), part)]
        for size, group in by_size:
            line = {
                "Env": paper.ENV_TITLES.get(env, env),
                "Group": _group_label(kind, size),
                "Points": str(len(group)),
                "Rounds": ", ".join(map(str, sorted(group["round"].unique()))),
                "Seeds": str(group["seed"].nunique()),
            }
            for column, name in (("predicted_plain", "plain"), ("predicted_centred", "centred")):
                line[f"Pearson ({name})"] = _correlation(group[column], group["actual"], pearsonr)
                line[f"Spearman ({name})"] = _correlation(group[column], group["actual"], spearmanr)
                line[f"Scale ({name})"] = _scale(group[column], group["actual"])
            test = group.dropna(subset=["test_change"])
            line["Pearson test Δ (centred)"] = _correlation(test["predicted_centred"], test["test_change"], pearsonr)
            line["Spearman test Δ (centred)"] = _correlation(test["predicted_centred"], test["test_change"], spearmanr)
            table.append(line)
    return pd.DataFrame(table)


def correlation_table(output: Output[AnalysisData], rows: pd.DataFrame) -> pd.DataFrame:
    return removal_correlations(rows)


def removal_scatter(output: Output[AnalysisData], rows: pd.DataFrame) -> Figure:
    """Actual Δf_return against each prediction, one row of panels per env; random groups coloured by
    size, the IIF and all-negative sets marked."""
    rows = rows[rows["kind"] != "none"]
    rows = rows.assign(group=[_group_label(kind, size) for kind, size in zip(rows["kind"], rows["size"])])
    envs = list(dict.fromkeys(rows["env"]))
    random_labels = [_group_label("random", s) for s in sorted(rows.loc[rows["kind"] == "random", "size"].unique())]
    palette = dict(zip(random_labels, sns.color_palette("viridis", len(random_labels))))
    palette |= {SET_LABELS["iif"]: "tab:red", SET_LABELS["all_negative"]: "black"}
    with figure_style():
        fig = Figure(figsize=(8.0, 3.2 * len(envs) + 0.6), layout="constrained")
        axes = fig.subplots(len(envs), len(PREDICTIONS), squeeze=False)
        for ax_row, env in zip(axes, envs):
            env_rows = rows[rows["env"] == env]
            for ax, (column, label) in zip(ax_row, PREDICTIONS.items()):
                sns.scatterplot(
                    data=env_rows,
                    x=column,
                    y="actual",
                    hue="group",
                    hue_order=list(palette),
                    palette=palette,
                    style="kind",
                    markers=MARKERS,
                    s=14,
                    linewidth=0,
                    ax=ax,
                    legend=False,
                )
                ends = np.array([env_rows[[column, "actual"]].min().min(), env_rows[[column, "actual"]].max().max()])
                ax.plot(ends, ends, color="grey", lw=0.6, ls="--")
                ax.set(
                    title=f"{paper.ENV_TITLES.get(env, env)}: {label}",
                    xlabel="predicted Δf_return",
                    ylabel="actual Δf_return",
                )
                ax.ticklabel_format(style="sci", scilimits=(0, 0))
                ax.xaxis.set_major_locator(MaxNLocator(5))
        kinds = [next((kind for kind, name in SET_LABELS.items() if name == label), "random") for label in palette]
        handles = [
            Line2D([], [], ls="", marker=MARKERS[kind], color=colour) for kind, colour in zip(kinds, palette.values())
        ]
        fig.legend(handles, list(palette), loc="outside lower center", ncols=3, frameon=False)
        fig.suptitle(f"{output.title}: {output.caption}", wrap=True)
    return fig


ROUND = 5  # every env's standard run is looked into at round 5 (more rounds when affordable)
COMMAND = (
    "env.rounds=10 eval.every=10 eval.episodes=100 "
    f"analysis.counterfactual.rounds=[{ROUND}]"
)  # the standard run only needs its first 10 rounds
ENVS = ("frozenlake", "acrobot", "minigrid", "lunarlander")
_NOTE = (
    "Round k's update of a standard-PPO run, rerun from θ_k with a group of records taken out of the same "
    "minibatches; Δf_return = f_return after it − after the standard update. Predicted to first order from "
    "the round-start influence (plain: −η·n_epochs/batch_size·Σ I_i; centred: I_i − its minibatch's mean, "
    "the kept records weighing more). Groups: random (fractions of the buffer), IIF's drop set (the env's p), "
    "all negative-influence records."
)

OUTPUTS: tuple[Output, ...] = (
    Output(
        "counterfactual_scatter",
        "Beyond: influence vs removal",
        _NOTE + " Dashed: y = x.",
        AnalysisData("counterfactual", ENVS, 1, (ROUND,), COMMAND),
        removal_scatter,
    ),
    Output(
        "counterfactual_correlations",
        "Beyond: influence vs removal (correlations)",
        _NOTE + " Pearson and Spearman over every group of a size (all rounds and seeds); scale: least-squares "
        "slope of actual on predicted through 0 (1: the first-order scale is right); test Δ: change of the "
        "test return on the same evaluation episodes.",
        AnalysisData("counterfactual", ENVS, 1, (ROUND,), COMMAND),
        correlation_table,
    ),
)
