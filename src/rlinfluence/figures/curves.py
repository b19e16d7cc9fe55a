"""Learning curves: test return against round, one panel per env, one colour per arm."""

from __future__ import annotations

from typing import Any

import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from rlinfluence import metrics
from rlinfluence.figures import paper
from rlinfluence.figures.control_runs import Runs
from rlinfluence.figures.render import figure_style
from rlinfluence.figures.requirements import Output

SEED_CURVES_NOTE = (
    "mean over seeds with a 95 % percentile-bootstrap interval of the mean (10,000 resamples, fixed seed), which "
    "stays within the seeds' range; thin lines: each seed"
)
CURVES_NOTE = f"Test return against round, {SEED_CURVES_NOTE}."


def seed_curves(ax: Axes, data: pd.DataFrame, y: str, **lines: Any) -> None:
    """`y` against round: each seed's curve, thin and faint, under the mean over seeds with its band
    (metrics.mean_band). `lines` are seaborn's hue, style and legend arguments; the seeds' lines add no legend."""
    thin = {**lines, "legend": False}
    sns.lineplot(data=data, x="round", y=y, units="seed", estimator=None, alpha=0.3, linewidth=0.6, ax=ax, **thin)
    sns.lineplot(data=data, x="round", y=y, errorbar=metrics.mean_band, ax=ax, **lines)


def learning_curves(output: Output[Runs], rows: pd.DataFrame) -> Figure:
    """The output's arms in each of its envs (`curves_figure`), one line style per protocol it compares."""
    runs = output.runs
    return curves_figure(
        rows, runs.envs, [arm.label for arm in runs.arms], f"{output.title}: {output.caption}", runs.protocols
    )


def curves_figure(
    rows: pd.DataFrame, envs: tuple[str, ...], arms: list[str], title: str, protocols: tuple[str, ...] = ()
) -> Figure:
    """Test return against round, one panel per env, one colour per label in `arms` (the rows' `arm`),
    each seed's curve under the mean over seeds and its band (`seed_curves`); one line style per protocol
    when `protocols` has several."""
    ncols = min(len(envs), 3)
    nrows = -(-len(envs) // ncols)
    palette = dict(zip(arms, sns.color_palette("colorblind", len(arms))))
    dashes = dict(zip(protocols, ["", (4, 2), (1, 1), (6, 2, 1, 2), (2, 4)]))
    with figure_style():
        fig = Figure(figsize=(4.0 * ncols, 3.0 * nrows), layout="constrained")
        axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
        for ax, env in zip(axes, envs):
            style = (
                {"style": "protocol", "style_order": list(protocols), "dashes": dashes} if len(protocols) > 1 else {}
            )
            seed_curves(
                ax,
                rows[rows["env"] == env].dropna(subset=["test_return"]),
                "test_return",
                hue="arm",
                hue_order=list(palette),
                palette=palette,
                legend=False,
                **style,
            )
            ax.set(title=paper.ENV_TITLES.get(env, env), xlabel="round", ylabel="test return")
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        for ax in axes[len(envs) :]:
            fig.delaxes(ax)
        handles = [Line2D([], [], color=color) for color in palette.values()]
        labels = list(palette)
        if len(protocols) > 1:
            handles += [
                Line2D([], [], color="black", dashes=dashes[protocol] or (None, None)) for protocol in protocols
            ]
            labels += [f"protocol {protocol}" for protocol in protocols]
        fig.legend(handles, labels, loc="outside lower center", ncols=min(len(labels), 3 * ncols), frameon=False)
        fig.suptitle(title, wrap=True)
    return fig
