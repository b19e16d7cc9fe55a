"""Section 4.1's diagnosis (Fig. 3, 8): the records of most negative influence and the GAE advantage's
errors, drawn from task=diagnose's CSVs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import seaborn as sns
from gymnasium.envs.toy_text.frozen_lake import MAPS
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle
from scipy.stats import spearmanr

from rlinfluence.config.compose import preset
from rlinfluence.config.schema import DiagnoseConfig
from rlinfluence.envs.make import STATE_SETTERS, make_env
from rlinfluence.figures import paper
from rlinfluence.figures.analysis_data import AnalysisData
from rlinfluence.figures.formatting import MISSING_CELL
from rlinfluence.figures.render import figure_style
from rlinfluence.figures.requirements import Output

DIAGNOSED_ROUND = 5  # the paper's k for Fig. 3
FIG8_ROUNDS = tuple(DiagnoseConfig().rounds)  # the rounds task=diagnose looks into unless told: Fig. 8's
BOTTOM_RECORDS = 100  # as many as the paper's Fig. 3a and 8 show
ARROWS = {0: (-1, 0), 1: (0, 1), 2: (1, 0), 3: (0, -1)}  # FrozenLake actions left, down, right, up as (dx, dy)
SIGN_COLOURS = {"Â > 0": "tab:blue", "Â < 0": "tab:red"}


def diagnosed_round(output: Output[AnalysisData]) -> int:
    """The one round an output of the diagnosis looks at."""
    [k] = output.runs.rounds
    return k


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
        ax.arrow(
            col + 0.5,
            row + 0.5,
            0.32 * dx,
            0.32 * dy,
            width=0.02 + 0.1 * group["count"] / most,
            length_includes_head=True,
            color=colour,
            alpha=0.85,
        )


def _arrow_legend(fig: Figure) -> None:
    fig.legend(
        [Patch(color=c) for c in SIGN_COLOURS.values()],
        list(SIGN_COLOURS),
        loc="outside lower center",
        ncols=2,
        frameon=False,
    )


def bottom_records_grid(output: Output[AnalysisData], rows: pd.DataFrame) -> Figure:
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
                _bottom_arrows(ax, run.nlargest(BOTTOM_RECORDS, "rank"))
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


def bottom_views(output: Output[AnalysisData], rows: pd.DataFrame) -> Figure:
    """Fig. 3b / 9: the egocentric views of the most negative-influence records, one row per seed."""
    rows = rows[rows["round"] == diagnosed_round(output)]
    seeds = sorted(rows["seed"].unique())
    env = make_env(preset("minigrid").env)
    with figure_style():
        fig = Figure(figsize=(1.3 * VIEWS_PER_SEED, 1.5 * len(seeds) + 0.8), layout="constrained")
        axes = fig.subplots(len(seeds), VIEWS_PER_SEED, squeeze=False)
        for ax_row, seed in zip(axes, seeds):
            bottom = rows[rows["seed"] == seed].nlargest(VIEWS_PER_SEED, "rank")
            for ax, record in zip(ax_row, bottom.itertuples()):
                ax.imshow(_egocentric_view(env, int(record.state)))
                ax.set(
                    xticks=[],
                    yticks=[],
                    title=f"seed {seed}: {MINIGRID_ACTIONS[record.action]}\n"
                    f"Â {record.advantage_gae:.2f}, Ā {record.advantage_true:.2f}",
                )
                ax.title.set_fontsize(6)
                ax.grid(False)
        fig.suptitle(f"{output.title}: {output.caption}", wrap=True)
    env.close()
    return fig


def _diagnosed(rows: pd.DataFrame, k: int) -> pd.DataFrame:
    return rows[rows["round"] == k].assign(
        error=lambda d: (d["advantage_true"] - d["advantage_gae"]).abs(),
        product=lambda d: d["advantage_true"] * d["advantage_gae"],
        agree=lambda d: np.where(
            np.sign(d["advantage_true"]) == np.sign(d["advantage_gae"]), "signs agree", "signs differ"
        ),
    )


def _shade_ends(ax, n_records: int) -> None:
    for start in (0, 0.8 * n_records):
        ax.axvspan(start, start + 0.2 * n_records, color="grey", alpha=0.15, lw=0)


def _per_seed_panels(output: Output[AnalysisData], rows: pd.DataFrame, draw) -> Figure:
    rows = _diagnosed(rows, diagnosed_round(output))
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


def advantage_error(output: Output[AnalysisData], rows: pd.DataFrame) -> Figure:
    """Fig. 3c: |Ā − Â| against rank, coloured by whether the signs agree."""

    def draw(ax, run):
        sns.scatterplot(
            data=run,
            x="rank",
            y="error",
            hue="agree",
            hue_order=["signs agree", "signs differ"],
            s=6,
            linewidth=0,
            ax=ax,
            legend=run["seed"].iloc[0] == rows["seed"].min(),
        )
        ax.set(title=f"seed {run['seed'].iloc[0]}", ylabel="|Ā − Â|")

    return _per_seed_panels(output, rows, draw)


def spearman(run: pd.DataFrame) -> float:
    return float(spearmanr(run["rank"], run["product"]).statistic)


def advantage_product(output: Output[AnalysisData], rows: pd.DataFrame) -> Figure:
    """Fig. 3d: Ā·Â against rank, with the Spearman correlation of the two."""

    def draw(ax, run):
        ax.scatter(run["rank"], run["product"], s=4, color="tab:purple", linewidths=0)
        ax.set(title=f"seed {run['seed'].iloc[0]}: Spearman {spearman(run):.2f}", ylabel="Ā · Â")

    return _per_seed_panels(output, rows, draw)


def spearman_table(output: Output[AnalysisData], rows: pd.DataFrame) -> pd.DataFrame:
    """Spearman(rank, Ā·Â) per env and seed at the diagnosed round, their mean ± std, and the paper's."""
    lines = []
    for env, env_rows in _diagnosed(rows, diagnosed_round(output)).groupby("env", sort=False):
        values = [spearman(run) for _, run in env_rows.groupby("seed")]
        per_seed = ", ".join(f"{v:.2f}" for v in values)
        paper_value = paper.FIG3D_SPEARMAN.get(env)
        lines.append(
            {
                "env": paper.ENV_TITLES[env],
                "records per seed": str(len(env_rows) // len(values)),
                "Spearman per seed": per_seed,
                "ours (mean ± std)": f"{np.mean(values):.2f} ± {np.std(values, ddof=1):.2f}",
                "paper": f"{paper_value:.2f}" if paper_value is not None else MISSING_CELL,
            }
        )
    return pd.DataFrame(lines)


_BOTTOM_NOTE = (
    f"The {BOTTOM_RECORDS} records of most negative influence (f_return) in the buffer of a standard-PPO "
    f"run, per (state, action) as arrows on the 4×4 map (width: how many; colour: sign of their "
    f"mean GAE advantage Â)."
)
_RANK_NOTE = (
    f"Records of round {DIAGNOSED_ROUND}'s buffer of a standard-PPO run, ranked by decreasing "
    f"influence (f_return); Ā = Q^π − V^π of θ_{DIAGNOSED_ROUND} by Monte-Carlo rollouts, Â = GAE. "
    f"Top and bottom 20 % shaded."
)
_DIAGNOSE_ROUNDS = f"analysis.diagnose.rounds=[{','.join(map(str, FIG8_ROUNDS))}]"
# MiniGrid: the diagnosed round only and 100 rollouts per (pose, action), 100 evaluation episodes (~13 min a seed here).
_DIAGNOSE_MINIGRID = f"eval.episodes=100 analysis.diagnose.rounds=[{DIAGNOSED_ROUND}] analysis.diagnose.rollouts=100"
_DIAGNOSE = {"frozenlake": _DIAGNOSE_ROUNDS, "minigrid": _DIAGNOSE_MINIGRID}


def _diagnosis(env: str, rounds: tuple[int, ...] = (DIAGNOSED_ROUND,)) -> AnalysisData:
    """task=diagnose's 3 seeds of `env` with its command, of which the output reads `rounds`."""
    return AnalysisData("diagnose", (env,), 3, rounds, _DIAGNOSE[env])


# The records of most negative influence (Fig. 3a, 8, 3b); Section 4 lists Pong's (Fig. 9) after them.
BOTTOM_RECORD_OUTPUTS: tuple[Output, ...] = (
    Output(
        "fig3a_bottom_records",
        "Fig. 3a",
        _BOTTOM_NOTE + f" Round {DIAGNOSED_ROUND}.",
        _diagnosis("frozenlake"),
        bottom_records_grid,
    ),
    Output(
        "fig8_bottom_records_rounds",
        "Fig. 8",
        _BOTTOM_NOTE + f" Rounds {', '.join(map(str, FIG8_ROUNDS[:-1]))} and {FIG8_ROUNDS[-1]}.",
        _diagnosis("frozenlake", FIG8_ROUNDS),
        bottom_records_grid,
    ),
    Output(
        "fig3b_bottom_views_minigrid",
        "Fig. 3b, 9",
        f"The egocentric views of the {VIEWS_PER_SEED} records of most negative influence (f_return) in round "
        f"{DIAGNOSED_ROUND}'s buffer of a standard-PPO run on MiniGrid, with the action taken, its GAE "
        f"advantage Â and true advantage Ā.",
        _diagnosis("minigrid"),
        bottom_views,
    ),
)
# The GAE advantage's errors against the influence rank (Fig. 3c, 3d).
RANK_OUTPUTS: tuple[Output, ...] = (
    *(
        Output(
            f"fig3c_advantage_error_{env}",
            f"Fig. 3c ({paper.ENV_TITLES[env]})",
            "|Ā − Â| against rank. " + _RANK_NOTE,
            _diagnosis(env),
            advantage_error,
        )
        for env in _DIAGNOSE
    ),
    *(
        Output(
            f"fig3d_advantage_product_{env}",
            f"Fig. 3d ({paper.ENV_TITLES[env]})",
            "Ā·Â against rank, Spearman correlation per seed. " + _RANK_NOTE,
            _diagnosis(env),
            advantage_product,
        )
        for env in _DIAGNOSE
    ),
    Output(
        "diagnosis_spearman",
        "Fig. 3d (Spearman)",
        f"Spearman correlation of rank by decreasing influence and Ā·Â at round {DIAGNOSED_ROUND}, per seed.",
        AnalysisData(
            "diagnose", tuple(_DIAGNOSE), 3, (DIAGNOSED_ROUND,), _DIAGNOSE_ROUNDS, (("minigrid", _DIAGNOSE_MINIGRID),)
        ),
        spearman_table,
    ),
)
