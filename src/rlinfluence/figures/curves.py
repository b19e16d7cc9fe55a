"""Learning curves: test return against round, one panel per env, one colour per arm."""

from __future__ import annotations

import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from rlinfluence import metrics
from rlinfluence.figures import paper
from rlinfluence.figures.control_runs import Runs
from rlinfluence.figures.render import figure_style
from rlinfluence.figures.requirements import Output

CURVES_NOTE = "Test return against round, mean over seeds ± 95 % t-interval."


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
    mean ± 95 % t-interval over seeds; one line style per protocol when `protocols` has several."""
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
            sns.lineplot(
                data=rows[rows["env"] == env].dropna(subset=["test_return"]),
                x="round",
                y="test_return",
                hue="arm",
                hue_order=list(palette),
                palette=palette,
                errorbar=lambda v: metrics.t_interval(v)[1:3],
                legend=False,
                ax=ax,
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
