"""Every output `rlinfluence task=figures` makes, in the order INDEX.md lists them.

First those drawn from the control runs (`RUN_OUTPUTS`, below: each names the experiment overlay that
makes its runs, and what it needs beyond or instead of what that overlay launches), then Section 4's,
drawn from the analyses' CSVs (section4.py), the counterfactual check's (counterfactual.py), the RLHF
outputs, drawn from the language-model runs' CSV (rlhf.py), the cross-env aggregates (aggregates.py)
the fidelity comparison with the authors' released pipeline (fidelity.py), IIF dropped into stock
stable-baselines3 PPO (sb3_dropin.py), the fidelity leads (fidelity_leads.py), planted bad data (corruption.py),
IIF on GRPO (grpo.py), the benchmark of rollout filters (filters.py), the stacked engine against
engine=default's (engines.py) and the filters' twenty-seed leaderboard (twenty_seeds.py).
"""

from __future__ import annotations

from dataclasses import replace

from rlinfluence.figures import (
    aggregates,
    corruption,
    counterfactual,
    engines,
    fidelity,
    fidelity_leads,
    filters,
    grpo,
    paper,
    rlhf,
    sb3_dropin,
    section4,
    twenty_seeds,
)
from rlinfluence.figures.arms import (
    ADAM_ARMS,
    ADVANTAGE_H1,
    ADVANTAGE_H2,
    IIF,
    IIF_AT_P,
    IIF_AUTO,
    IIF_GUARD_AUTO,
    RANDOM,
    ROBUST_ARMS,
    STANDARD,
    TD_ERROR,
)
from rlinfluence.figures.collapse import collapse_table, failure
from rlinfluence.figures.control_runs import Runs
from rlinfluence.figures.curves import CURVES_NOTE, learning_curves
from rlinfluence.figures.pairings import protocol_table
from rlinfluence.figures.requirements import Output
from rlinfluence.figures.tables import (
    RT_NOTE,
    SE_NOTE,
    eval_cadence_table,
    fig6b_table,
    table2_p_ablation,
    table3_adam,
    table3_preconditioner,
    table4_final_return_ci,
    table5_runtime,
)
from rlinfluence.run.identity import CLEAN, PAPER

# The main comparison's envs but Highway and BipedalWalker, whose evaluation cadence the table was made to
# choose (docs/reproduction.md, "Evaluation cadence").
CADENCE_ENVS = ("frozenlake", "acrobot", "minigrid", "lunarlander")
# Each part of the authors' collection alone (identity.PROTOCOL_SWITCHES names). FrozenLake always
# starts in the same state, so repeating the seeded starts alone changes nothing there.
COLLECTION_PARTS = {"acrobot": ("abandon", "samestarts", "samenoise"), "frozenlake": ("abandon", "samenoise")}

# Figs. 12-13 are drawn twice from the same runs: the curves and a round-savings table.
ADVANTAGE_HEURISTIC_RUNS = Runs("heuristics_advantage", (STANDARD, IIF, ADVANTAGE_H1, ADVANTAGE_H2))
TD_ERROR_RUNS = Runs("heuristics_td_error", (STANDARD, IIF, TD_ERROR))
# The paper's 3 seeds of Table 3 and Fig. 15, of the 5 +experiment=adam launches.
ADAM_RUNS = Runs("adam", (STANDARD, IIF), seeds_needed=3)
# The protocol study grows across sittings: at least 5 seeds, every common one used.
PROTOCOL_RUNS = Runs("protocol", (STANDARD, IIF, RANDOM), seeds_needed=5, all_seeds=True)
ROBUST_RUNS = Runs("robust", (STANDARD, IIF, *ROBUST_ARMS), all_seeds=True)

# Beyond the paper: p = auto against every hand-tuned p of the p ablation, on Table 2's seeds and against
# Table 2's standard PPO runs (the same settings as the main comparison's).
AUTO_VS_P_ARMS = (
    replace(STANDARD, overlay="p_ablation"),
    *(replace(arm, overlay="p_ablation") for arm in IIF_AT_P),
    IIF_AUTO,
    IIF_GUARD_AUTO,
)

ROBUST_NOTE = (
    "SE as in Fig. 6b, per seed; then mean ± std over seeds (the paper's statistic), median, "
    "interquartile mean with a 95 % percentile-bootstrap CI over seeds (scipy, 10,000 resamples, "
    "fixed seed), the mean without the worst seed, and SE_ave of the seed-mean curves. Last column: "
    "SE_ave at 10 levels evenly spaced between standard PPO's initial and peak return instead of its "
    "running-maximum records (which crowd near a noisy plateau)."
)

RUN_OUTPUTS: tuple[Output, ...] = (
    Output(
        "fig6a_learning_curves",
        "Fig. 6a",
        "IIF, standard PPO and random filtering (dropping as many records as IIF). " + CURVES_NOTE,
        Runs("main", (STANDARD, IIF, RANDOM)),
        learning_curves,
    ),
    Output(
        "fig6b_efficiency",
        "Fig. 6b",
        "Training-efficiency gains of IIF. " + SE_NOTE + " " + RT_NOTE,
        Runs("main", (STANDARD, IIF)),
        fig6b_table,
    ),
    # Where a noisy plateau makes most running-maximum records noise (Highway), the mean over seeds alone
    # cannot say whether a filter learns faster; the same runs' robust and even-level summaries can.
    Output(
        "fig6b_robust",
        "Fig. 6b (robust)",
        "Fig. 6a/6b's runs: IIF and random filtering, each against standard PPO of the same seed. " + ROBUST_NOTE,
        Runs("main", (STANDARD, IIF, RANDOM)),
        protocol_table,
    ),
    Output(
        "eval_cadence",
        "Evaluation cadence",
        "What evaluating only every k-th round (and the last) does to IIF's SE against standard PPO: the main "
        "comparison's every-round curves of both arms thinned to every k-th round, then SE as in Fig. 6b, mean "
        "± std over seeds; the last column is the absolute per-seed change from the every-round value.",
        Runs("main", (STANDARD, IIF), envs_needed=CADENCE_ENVS),
        eval_cadence_table,
    ),
    Output(
        "table2_p_ablation",
        "Table 2",
        "Round savings of IIF for each drop percentage p (the paper printed no p = 6.25 row). " + SE_NOTE,
        Runs("p_ablation", (STANDARD, *IIF_AT_P)),
        table2_p_ablation,
    ),
    Output(
        "table3_adam",
        "Table 3",
        "Training-efficiency gains of IIF, both arms with Adam. " + SE_NOTE + " " + RT_NOTE,
        ADAM_RUNS,
        table3_adam,
    ),
    Output(
        "table3_adam_preconditioner",
        "Table 3, Adam-aware influence",
        "IIF under Adam scoring records by ⟨P ∇ℓ_i, ∇L_f⟩, P = Adam's 1/(√v̂ + ε) at θ_k (round 1: P = I, no "
        "second moment yet), against IIF with the paper's plain influence; both against the same standard PPO "
        "(Adam) runs of Table 3; paper rows: Table 3's IIF. " + SE_NOTE + " " + RT_NOTE,
        Runs("adam_preconditioner", ADAM_ARMS),
        table3_preconditioner,
    ),
    Output(
        "table4_final_return_ci",
        "Table 4",
        "95 % t-interval over seeds of the paired final-return gain IIF − standard PPO "
        "(return of each run's last evaluated round).",
        Runs("main", (STANDARD, IIF), envs_needed=tuple(paper.TABLE4)),  # the envs the paper reports
        table4_final_return_ci,
    ),
    Output(
        "table5_runtime",
        "Table 5",
        "Wall-clock seconds, mean ± std over seeds. Per-round columns average the training "
        "rounds; totals are collection + influence + update without evaluation. 'To std peak' is IIF's "
        "time to reach standard PPO's peak return (none for a seed whose IIF never reaches it); RT_peak divides "
        "it by standard PPO's time to its peak (the paper divided by standard PPO's whole run).",
        Runs("main", (STANDARD, IIF)),
        table5_runtime,
    ),
    Output(
        "fig12_advantage_heuristics",
        "Fig. 12",
        "Advantage heuristics H1 and H2 (same p as IIF) against IIF and standard PPO. " + CURVES_NOTE,
        ADVANTAGE_HEURISTIC_RUNS,
        learning_curves,
    ),
    Output(
        "fig13_td_error",
        "Fig. 13",
        "TD-error (PER-style) reweighting against IIF and standard PPO. " + CURVES_NOTE,
        TD_ERROR_RUNS,
        learning_curves,
    ),
    # The paper shows Figs. 12-13 as curves only; these tables put a number on "matches IIF" / "hurts".
    Output(
        "fig12_efficiency",
        "Fig. 12, round savings",
        "Advantage heuristics H1 and H2 and IIF (same p), each against standard PPO of the same seed. " + ROBUST_NOTE,
        ADVANTAGE_HEURISTIC_RUNS,
        protocol_table,
    ),
    Output(
        "fig13_efficiency",
        "Fig. 13, round savings",
        "TD-error reweighting and IIF, each against standard PPO of the same seed. " + ROBUST_NOTE,
        TD_ERROR_RUNS,
        protocol_table,
    ),
    Output(
        "fig14_p_ablation",
        "Fig. 14",
        "IIF with drop percentage p against standard PPO. " + CURVES_NOTE,
        Runs("p_ablation", (STANDARD, *IIF_AT_P)),
        learning_curves,
    ),
    Output(
        "fig15_adam", "Fig. 15", "IIF against standard PPO, both with Adam. " + CURVES_NOTE, ADAM_RUNS, learning_curves
    ),
    Output(
        "protocol_comparison",
        "Protocols",
        "Our protocol (clean) against the authors' (paper: influence normalised per 64-record chunk, "
        "last partial minibatch dropped, every round restarted from the same seeded episode starts and "
        "action noise), each arm against standard PPO of the same seed. 'paper vs PPO clean' pairs the "
        "authors' IIF with a continuous standard run, as their numbers did. " + ROBUST_NOTE,
        PROTOCOL_RUNS,
        protocol_table,
    ),
    Output(
        "protocol_comparison_lunarlander",
        "Protocols (LunarLander)",
        "As the protocol table, LunarLander with 5 seeds. " + ROBUST_NOTE,
        # The overlay makes the paper-protocol runs; the clean ones are the main comparison's.
        Runs("protocol_lunarlander", (STANDARD, IIF, RANDOM), protocols_needed=(CLEAN, PAPER)),
        protocol_table,
    ),
    Output(
        "protocol_curves",
        "Protocol curves",
        "IIF, standard PPO and random filtering under our protocol (solid) and the authors' (dashed). " + CURVES_NOTE,
        PROTOCOL_RUNS,
        learning_curves,
    ),
    *(
        Output(
            f"protocol_parts_{env}",
            f"Collection parts ({paper.ENV_TITLES[env]})",
            "Each part of the authors' collection alone: abandon = the unfinished episode is dropped at "
            "each round start, samestarts = every round replays the same seeded episode starts, samenoise "
            "= every round reuses the same action noise. " + ROBUST_NOTE,
            Runs(
                "protocol_parts",
                (STANDARD, IIF),
                envs_needed=(env,),
                protocols_needed=(CLEAN, *parts, PAPER),
                seeds_needed=5,
                all_seeds=True,
            ),
            protocol_table,
        )
        for env, parts in COLLECTION_PARTS.items()
    ),
    Output(
        "collapse_frozenlake",
        "Collapse rate (FrozenLake)",
        f"Seeds of IIF (p = 50 %) {failure('frozenlake').whose}, with the rate's Wilson 95 % interval.",
        Runs("collapse", (IIF,), seeds_needed=10, all_seeds=True),
        collapse_table,
    ),
    Output(
        "collapse_acrobot",
        "Stuck seeds (Acrobot)",
        f"Seeds {failure('acrobot').whose}, with the rate's Wilson 95 % interval.",
        PROTOCOL_RUNS.restricted_to(("acrobot",)),
        collapse_table,
    ),
    Output(
        "robust_collapse_frozenlake",
        "Robust IIF: collapse rate (FrozenLake)",
        f"Seeds {failure('frozenlake').whose}: plain IIF (p = 50 %) against the robust variants, "
        "our protocol, with the rate's Wilson 95 % interval.",
        # Plain IIF's runs are +experiment=collapse's clean ones.
        Runs("robust_collapse", (IIF, *ROBUST_ARMS), all_seeds=True),
        collapse_table,
    ),
    Output(
        "robust_stall_acrobot",
        "Robust IIF: stuck seeds (Acrobot)",
        f"Seeds {failure('acrobot').whose}: standard PPO, plain IIF (p = 50 %) and the "
        "robust variants, our protocol, with the rate's Wilson 95 % interval.",
        ROBUST_RUNS.restricted_to(("acrobot",)),
        collapse_table,
    ),
    Output(
        "robust_efficiency",
        "Robust IIF: round savings",
        "Plain IIF at the paper's p and the robust variants, each against standard PPO of the same seed, our "
        "protocol. " + ROBUST_NOTE,
        ROBUST_RUNS,
        protocol_table,
    ),
    Output(
        "robust_auto_vs_p",
        "Robust IIF: p = auto against the hand-tuned p",
        "IIF with p = auto (alone and with the entropy guard) beside IIF at each p of the p ablation (Table 2), "
        "on Table 2's seeds, each against Table 2's standard PPO run of the same seed, our protocol. " + ROBUST_NOTE,
        Runs("robust", AUTO_VS_P_ARMS),
        protocol_table,
    ),
    Output(
        "robust_curves",
        "Robust IIF: curves",
        "Plain IIF at the paper's p, the robust variants and standard PPO, our protocol. " + CURVES_NOTE,
        ROBUST_RUNS,
        learning_curves,
    ),
)

OUTPUTS = (
    RUN_OUTPUTS
    + section4.OUTPUTS
    + counterfactual.OUTPUTS
    + rlhf.OUTPUTS
    + aggregates.OUTPUTS
    + fidelity.OUTPUTS
    + sb3_dropin.OUTPUTS
    + fidelity_leads.OUTPUTS
    + corruption.OUTPUTS
    + grpo.OUTPUTS
    + filters.OUTPUTS
    + engines.OUTPUTS
    + twenty_seeds.OUTPUTS
)
