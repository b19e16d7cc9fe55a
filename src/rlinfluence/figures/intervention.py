"""Section 4.3's single-round intervention (Fig. 5, 11): one round's update without its negative-influence
records (or as many at random), drawn from task=intervene's CSVs."""

from __future__ import annotations

import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from rlinfluence.analyses.intervene import p_variant
from rlinfluence.figures import paper
from rlinfluence.figures.analysis_data import AnalysisData
from rlinfluence.figures.arms import iif_p
from rlinfluence.figures.control_runs import CPU_EVALUATION
from rlinfluence.figures.render import figure_style
from rlinfluence.figures.requirements import Output
from rlinfluence.share import FilterShare

ARM_LABELS = {"influence": "drop all negative influence", "random": "drop as many at random"}


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


def _delta_boxes(output: Output[AnalysisData], rows: pd.DataFrame, arms: tuple[str, ...]) -> Figure:
    data = deltas(rows)
    data = data[data["arm"].isin(arms)].assign(arm=lambda d: d["arm"].map(ARM_LABELS))
    envs = output.runs.envs
    with figure_style():
        fig = Figure(figsize=(7.5, 2.6 * len(envs) + 0.5), layout="constrained")
        for ax, env in zip(fig.subplots(len(envs), 1, squeeze=False).ravel(), envs):
            rounds = sorted(data.loc[data["env"] == env, "round"].unique())
            # Rounds as category labels in numeric order (seaborn would otherwise warn and sort them as text).
            sns.boxplot(
                data=data[data["env"] == env].astype({"round": str}),
                x="round",
                y="delta",
                hue="arm",
                order=[str(k) for k in rounds],
                hue_order=[ARM_LABELS[a] for a in arms],
                fliersize=1.5,
                linewidth=0.6,
                ax=ax,
                legend=env == envs[0] and len(arms) > 1,
            )
            ax.axhline(0, color="black", lw=0.6)
            ax.set(title=paper.ENV_TITLES[env], ylabel="Δ test return")
            for label in ax.get_xticklabels():  # beyond 15 rounds, every 5th: 50 labels do not fit
                label.set_visible(len(rounds) <= 15 or int(label.get_text()) % 5 == 0)
        fig.suptitle(f"{output.title}: {output.caption}", wrap=True)
    return fig


def fig5_boxes(output: Output[AnalysisData], rows: pd.DataFrame) -> Figure:
    return _delta_boxes(output, rows, ("influence",))


def fig11_boxes(output: Output[AnalysisData], rows: pd.DataFrame) -> Figure:
    return _delta_boxes(output, rows, ("influence", "random"))


def _delta_summary(delta: pd.Series) -> dict[str, str]:
    return {
        "share Δ > 0": f"{(delta > 0).mean():.0%}",
        "share Δ < 0": f"{(delta < 0).mean():.0%}",
        "share Δ > 0 of Δ ≠ 0": f"{(delta > 0).sum() / max((delta != 0).sum(), 1):.0%}",
        "median Δ": f"{delta.median():.3g}",
        "mean Δ": f"{delta.mean():.3g}",
    }


def intervention_table(output: Output[AnalysisData], rows: pd.DataFrame) -> pd.DataFrame:
    """Per env and arm, over (round, seed) pairs: the shares with Δ > 0 and Δ < 0 (a converged policy
    often gives Δ = 0 exactly), the median and mean Δ."""
    data = deltas(rows)
    lines = []
    for env in output.runs.envs:
        for arm in ARM_LABELS:
            part = data[(data["env"] == env) & (data["arm"] == arm)]
            lines.append(
                {
                    "env": paper.ENV_TITLES[env],
                    "arm": arm_label(arm, drop_share(rows, env)),
                    "seeds": str(part["seed"].nunique()),
                    "rounds": str(part["round"].nunique()),
                }
                | _delta_summary(part["delta"])
            )
    return pd.DataFrame(lines)


_INTERVENE_NOTE = (
    "From each round's θ_k and optimizer state of a standard-PPO run, one update on the same "
    "buffer; Δ = test return after the update minus that after the update on all records "
    "(same evaluation episodes); one box per round over seeds."
)
INTERVENED_ENVS = ("frozenlake", "acrobot", "minigrid", "lunarlander")
# Evaluation episodes as in the main reproduction (reproduce_cpu.sh); FrozenLake keeps its preset's 1,000.
_INTERVENE_EPISODES = tuple((env, CPU_EVALUATION[env]) for env in INTERVENED_ENVS if env in CPU_EVALUATION)


def _intervened_at_iif_p(envs: tuple[str, ...]) -> AnalysisData:
    """task=intervene with analysis.intervene.p at each env's IIF p: its command and its `-p<p>` files."""
    episodes = dict(_INTERVENE_EPISODES)
    return AnalysisData(
        "intervene",
        envs,
        3,
        env_overrides=tuple(
            (env, f"{episodes.get(env, '')} analysis.intervene.p={iif_p(env):g}".strip()) for env in envs
        ),
        variants=tuple((env, p_variant(FilterShare(iif_p(env)))) for env in envs),
    )


OUTPUTS: tuple[Output, ...] = (
    Output(
        "fig5_intervention",
        "Fig. 5",
        "Dropping all negative-influence records of one round. " + _INTERVENE_NOTE,
        AnalysisData("intervene", ("frozenlake", "acrobot"), 3, env_overrides=_INTERVENE_EPISODES),
        fig5_boxes,
    ),
    Output(
        "fig11_intervention_random",
        "Fig. 11",
        "Influence-guided against random dropping of as many records. " + _INTERVENE_NOTE,
        AnalysisData("intervene", INTERVENED_ENVS, 3, env_overrides=_INTERVENE_EPISODES),
        fig11_boxes,
    ),
    Output(
        "intervention_summary",
        "Fig. 5/11 (summary)",
        "Δreturn of one round's update without the dropped records, against the update on all records.",
        AnalysisData("intervene", INTERVENED_ENVS, 3, env_overrides=_INTERVENE_EPISODES),
        intervention_table,
    ),
    Output(
        "intervention_at_iif_p",
        "Fig. 5/11 at IIF's p (beyond the paper)",
        "As the summary, but each round drops only the share of its negative-influence records that an IIF "
        "round drops (the env's p), not all of them.",
        _intervened_at_iif_p(INTERVENED_ENVS),
        intervention_table,
    ),
)
