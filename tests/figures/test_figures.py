"""Figures and tables from synthetic run directories written the way the training loop writes them."""

import filecmp
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from omegaconf import OmegaConf

from conftest import write_analyses, write_authors_runs, write_lm_runs, write_sb3_runs
from rlinfluence.config.compose import preset
from rlinfluence.figures import (
    catalogue,
    corruption,
    engines,
    fidelity_leads,
    filters,
    main_from_config,
    paper,
    regenerate,
    tidy_from_runs,
    twenty_seeds,
)
from rlinfluence.figures.catalogue import RUN_OUTPUTS as OUTPUTS
from rlinfluence.figures.control_runs import Runs
from rlinfluence.figures.curves import curves_figure
from rlinfluence.figures.formatting import pm_over_seeds
from rlinfluence.figures.regenerate import refresh_from_runs
from rlinfluence.figures.render import latex_table, save_figure
from rlinfluence.figures.requirements import FigureData
from rlinfluence.figures.rlhf import LM_CSV
from rlinfluence.figures.runs import TIDY_COLUMNS, load_tidy, scan_runs
from rlinfluence.round import is_eval_round
from rlinfluence.run.checkpoint import RunDirError
from rlinfluence.run.provenance import HARDWARE_COLUMNS

# Per-seed curves (seed s adds 10·s to every round, which no speed-up metric can see):
# standard PPO reaches levels 1, 2, 3, 4 at rounds 1..4; IIF reaches them at rounds 1, 1, 2, 2,
# so SE_ave = mean(0, 50, 33.3, 50) = 33.3 %, SE_peak = 50 %, final gain = 1.
CURVES = {"ppo": [0, 1, 2, 3, 4], "iif": [0, 2, 4, 5, 5]}
OTHER_CURVE = [0, 0.5, 1, 1.5, 2]
# Seconds per training round. Std: 1 + 0 + 2 = 3 s, peak after 12 s. IIF: 1 + 0.5 + 1 = 2.5 s,
# std peak reached at round 2 after 5 s: RT_peak = 1 − 5/12 = 58.3 %. Evaluation (7 s) never counts.
TIMES = {"ppo": (1.0, 0.0, 2.0), "iif": (1.0, 0.5, 1.0)}


def write_run(
    root: Path,
    experiment: str,
    env: str,
    tag: str,
    seed: int,
    done: bool = True,
    curve: list[float] | None = None,
    protocol: str = "clean",
    eval_every: int = 1,
    config_hash: str | None = None,
    optimizer: str = "sgd",
) -> Path:
    """One run directory following the core's contract (metrics.csv, summary.json, DONE); with
    `eval_every` > 1 the rounds a run with eval.every does not evaluate have no test return;
    `config_hash` is that of its non-default settings (None: all default)."""
    method, _, p = tag.partition("-p")
    method = method.split("-")[0]
    curve = curve or [r + 10 * seed for r in CURVES.get(method, OTHER_CURVE)]
    curve = [r if is_eval_round(k, eval_every, len(curve) - 1) else float("nan") for k, r in enumerate(curve)]
    collect, influence, update = TIMES.get(method, (1.0, 0.0, 2.0))
    leaf = "-".join([tag] + ([protocol] if protocol != "clean" else []) + ([config_hash] if config_hash else []))
    run_dir = root / experiment / env / optimizer / leaf / f"seed{seed}"
    (run_dir / ".hydra").mkdir(parents=True)
    (run_dir / ".hydra" / "config.yaml").write_text(f"seed: {seed}\n")
    rounds = range(len(curve))
    trained = [k > 0 for k in rounds]  # round 0 only evaluates the initial policy
    pd.DataFrame(
        {
            "round": rounds,
            "env_steps": [2048 * k for k in rounds],
            "test_return": curve,
            "test_return_sem": 0.1,
            "eval_episodes": 100,
            "n_records": 2048,
            "n_kept": 2000,
            "n_negative": 100,
            "kept_fraction": 2000 / 2048,
            "policy_loss": 0.0,
            "value_loss": 0.0,
            "entropy": 1.0,
            "approx_kl": 0.0,
            "clip_fraction": 0.0,
            "time_collect": [collect * t for t in trained],
            "time_influence": [influence * t for t in trained],
            "time_select": [0.1 * t for t in trained],
            "time_update": [update * t for t in trained],
            "time_eval": 7.0,
        }
    ).to_csv(run_dir / "metrics.csv", index=False)
    (run_dir / "summary.json").write_text(
        json.dumps(
            {
                "experiment": experiment,
                "env": env,
                "method": method,
                "method_tag": tag,
                "p": float(p) if p not in ("", "auto") else None,
                "optimizer": optimizer,
                "protocol": protocol,
                "config_hash": config_hash,
                "seed": seed,
                "rounds": len(curve) - 1,
                "rounds_completed": len(curve) - 1,
                "final_test_return": curve[-1],
                "done": done,
            }
        )
    )
    if done:
        (run_dir / "DONE").touch()
    return run_dir


# Fidelity lead 1's standard PPO (trained on another env): one level, reached at round 4 (Highway's runs are a round
# shorter than the main comparison's: one level at round 3).
TRAIN_ENV_CURVES: dict[str, list[float]] = {"frozenlake": [0, 0, 0, 0, 4], "highway": [0, 0, 0, 4]}


def write_every_needed_run(root: Path) -> None:
    every_runs = (
        [o.runs for o in OUTPUTS]
        + [twenty_seeds.STUDY_RUNS]
        + [
            runs
            for sources in (fidelity_leads.LEADS, filters.FILTERS_RUNS, engines.ENGINE_RUNS)
            for _, runs in sources.parts
            if isinstance(runs, (Runs, engines.StackedRuns))
        ]
    )
    needed = {
        (runs.experiment_of(arm), env, optimizer or "sgd", arm.tag_for(env), seed, protocol)
        for runs in every_runs
        for env, optimizer in map(runs.source, runs.envs)
        for arm in runs.arms
        for seed in range(runs.seeds)
        for protocol in runs.protocols
    }
    for experiment, env, optimizer, tag, seed, protocol in sorted(needed):
        lead = TRAIN_ENV_CURVES[env] if experiment == fidelity_leads.TRAIN_ENV else None
        curve = [r + 10 * seed for r in lead] if lead else None
        # BipedalWalker's committed runs evaluate every 5th round (CPU_EVALUATION); here every 2nd of 4.
        eval_every = 2 if env == "bipedalwalker" else 1
        write_run(
            root, experiment, env, tag, seed, curve=curve, protocol=protocol, eval_every=eval_every, optimizer=optimizer
        )


# Per round of every planted run: IIF's drops found planted records at precision 0.5 and recall 0.25, random's at
# precision 0.1; standard PPO drops none. Influence ranks them at AUROC 0.8 in every arm; the advantage heuristic
# has no score.
DETECTION = {"iif": (0.5, 0.25, 0.8), "random": (0.1, 0.25, 0.8), "ppo": (None, 0.0, 0.8)}


def write_corruption_runs(root: Path) -> None:
    """The planted-data study's runs (figures/corruption.py), each with its corruption.jsonl; an experiment's runs
    share the config hash of their fraction."""
    for _, runs in corruption.CORRUPTED_SOURCES:
        for env in runs.envs:
            for arm in runs.arms:
                for seed in range(runs.seeds):
                    tag = arm.tag_for(env)
                    run_dir = write_run(root, runs.experiment, env, tag, seed, config_hash=f"c{runs.fraction}")
                    precision, recall, auroc = DETECTION[tag.partition("-")[0]]
                    lines: list[dict[str, Any]] = [
                        {"round": k, "n_planted": 10, "precision": precision, "recall": recall}
                        | {"auroc_influence": auroc, "auroc_advantage": None, "planted": [1, 2]}
                        for k in range(1, len(CURVES["ppo"]))
                    ]
                    (run_dir / "corruption.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))


def write_lm_detection(data_dir: Path) -> None:
    """The planted LM runs' committed detection rows (their test returns are write_lm_runs's), as DETECTION."""
    rows = [
        {"experiment": "corruption_lm_tiny_0.1", "env": "toxicity_tiny", "method": method, "method_tag": tag}
        | {"optimizer": "adam", "protocol": "clean", "config_hash": "default", "seed": seed, "round": k}
        | dict(zip(("precision", "recall", "auroc_influence"), DETECTION[method]))
        | {"n_planted": 6, "auroc_advantage": None}
        for method, tag in (("ppo", "ppo"), ("iif", "iif-p100"), ("random", "random-p100"))
        for seed in range(5)
        for k in range(1, 5)
    ]
    (data_dir / corruption.DETECTION_CSV).parent.mkdir(parents=True)
    pd.DataFrame(rows).reindex(columns=corruption.DETECTION_COLUMNS).to_csv(
        data_dir / corruption.DETECTION_CSV, index=False
    )


def table(out_dir: Path, name: str) -> pd.DataFrame:
    """A written Markdown table back as strings (skipping the caption)."""
    lines = [line for line in (out_dir / f"{name}.md").read_text().splitlines() if line.startswith("|")]
    cells = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]
    return pd.DataFrame(cells[2:], columns=cells[0])


def files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """Every needed run under runs/, regenerated once: (results, data_dir, out_dir)."""
    root = tmp_path_factory.mktemp("repo")
    write_every_needed_run(root / "runs")
    write_analyses(root / "data")
    write_lm_runs(root / "data")
    write_authors_runs(root / "data")
    write_sb3_runs(root / "data")
    write_corruption_runs(root / "runs")
    write_lm_detection(root / "data")
    results = regenerate(root / "data", root / "out", runs_root=root / "runs")
    return results, root / "data", root / "out"


FIGURES = [
    "fig6a_learning_curves",
    "fig12_advantage_heuristics",
    "fig13_td_error",
    "fig14_p_ablation",
    "fig15_adam",
    "protocol_curves",
    "fig3a_bottom_records",
    "fig8_bottom_records_rounds",
    "fig3c_advantage_error_frozenlake",
    "fig3c_advantage_error_minigrid",
    "fig3d_advantage_product_frozenlake",
    "fig3d_advantage_product_minigrid",
    "fig5_intervention",
    "fig11_intervention_random",
    "fig3b_bottom_views_minigrid",
    "fig9_bottom_frames_pong",
    "robust_curves",
    "counterfactual_scatter",
    "fig10_timeline_acrobot",
    "fig4_timeline_highway",
    "fig7_rlhf",
    "fig16_rlhf_targets",
    "fig7_rlhf_tiny",
    "fig16_rlhf_targets_tiny",
    "aggregates_profiles",
    "aggregates_iqm_curves",
    "fidelity_three_way_curves",
    "corruption_curves",
    "grpo_tiny_curves_collected",
    "grpo_tiny_curves_recompute",
    "filters_profiles",
    "engine_equivalence_curves",
    "twenty_seeds_paired_differences",
    "twenty_seeds_profiles",
    "twenty_seeds_iqm_curves",
]
TABLES = [
    "fig6b_efficiency",
    "table2_p_ablation",
    "table3_adam",
    "table4_final_return_ci",
    "table5_runtime",
    "protocol_comparison",
    "protocol_comparison_lunarlander",
    "protocol_parts_acrobot",
    "protocol_parts_frozenlake",
    "collapse_frozenlake",
    "collapse_acrobot",
    "diagnosis_spearman",
    "intervention_summary",
    "intervention_at_iif_p",
    "robust_collapse_frozenlake",
    "robust_efficiency",
    "robust_auto_vs_p",
    "robust_stall_acrobot",
    "table3_adam_preconditioner",
    "counterfactual_correlations",
    "table6_rlhf_runtime",
    "table6_rlhf_runtime_tiny",
    "fig12_efficiency",
    "fig13_efficiency",
    "eval_cadence",
    "fig6b_robust",
    "aggregates_improvement",
    "fidelity_three_way",
    "fidelity_alignment",
    "fidelity_alignment_ours",
    "sb3_dropin",
    "fidelity_leads",
    "corruption_detection",
    "corruption_recovery",
    "corruption_lm_tiny",
    "grpo_tiny",
    "grpo_paper",
    "filters_leaderboard",
    "engine_equivalence",
    "twenty_seeds_leaderboard",
    "twenty_seeds_improvement",
]


def test_every_output_is_made_with_its_files(made):
    results, _, out_dir = made
    assert sorted(name for name, status, _ in results if status == "made") == sorted(FIGURES + TABLES)
    expected = {f"{name}{suffix}" for name in FIGURES for suffix in (".png", ".pdf")} | {
        f"{name}{suffix}" for name in TABLES for suffix in (".md", ".tex")
    }
    assert set(files(out_dir)) == expected | {"MISSING.md", "INDEX.md", "PROGRESS.md"}
    assert all(size > 0 for size in map(len, files(out_dir).values()))
    assert "Every figure and table was made." in (out_dir / "MISSING.md").read_text()


def test_tidy_csvs_hold_one_row_per_run_and_round(made):
    _, data_dir, _ = made
    assert sorted(p.name for p in data_dir.iterdir() if p.is_file()) == [
        "adam.csv",
        "adam_preconditioner.csv",
        "authors.csv",
        "authors_eval_noise.csv",
        "corruption_advantage_sign_0.05.csv",
        "corruption_advantage_sign_0.1.csv",
        "corruption_advantage_sign_0.2.csv",
        "corruption_reward_0.1.csv",
        "engine_equivalence.csv",
        "eval_noise.csv",  # the fidelity leads' runs: a refresh gathers them into their experiments' CSVs
        "fidelity_train_env.csv",
        "filters.csv",
        "heuristics_advantage.csv",
        "heuristics_td_error.csv",
        "main.csv",
        "p_ablation.csv",
        "sb3.csv",
        # one per env and arm (runs.ONE_CSV_PER_ARM): MiniGrid's hold both its blocks (SGD and Adam)
        *sorted(
            {
                f"twenty_seeds.{env}.{arm.tag_for(env)}.csv"
                for env, _ in map(twenty_seeds.block_source, twenty_seeds.STUDY_ENVS)
                for arm in twenty_seeds.ARMS
            }
        ),
    ]
    main = pd.read_csv(data_dir / "main.csv")
    # These runs recorded no hardware (their summary.json has no provenance): a CSV has no column for it.
    assert list(main.columns) == [column for column in TIDY_COLUMNS if column not in HARDWARE_COLUMNS]
    engine_runs = [runs for _, runs in engines.ENGINE_RUNS.parts if isinstance(runs, Runs)]  # 10 seeds of main's
    main_runs = {
        (env, arm.tag_for(env), protocol, seed)
        for runs in [o.runs for o in OUTPUTS] + engine_runs
        for env in runs.envs
        for arm in runs.arms
        if runs.experiment_of(arm) == "main"
        for protocol in runs.protocols
        for seed in range(runs.seeds)
    }
    assert len(main) == len(main_runs) * 5  # runs × rounds (0..4)
    assert main.groupby(["env", "method_tag", "protocol", "seed"]).size().eq(5).all()


MAIN_ENV_TITLES = ["FrozenLake", "Acrobot", "MiniGrid", "Highway", "LunarLander", "BipedalWalker"]


@pytest.mark.parametrize(
    "name, row_keys",
    [
        ("fig6b_efficiency", [(env, source) for env in MAIN_ENV_TITLES for source in ("ours", "paper")]),
        (
            "table2_p_ablation",
            [
                (env, p, source)
                for env in ["FrozenLake", "Acrobot", "MiniGrid", "LunarLander"]
                for p in ["6.25", "12.5", "25", "50", "100"]
                for source in ("ours", "paper")
            ],
        ),
        ("table3_adam", [(env, source) for env in ["MiniGrid", "LunarLander"] for source in ("ours", "paper")]),
        (
            "table3_adam_preconditioner",
            [
                (env, arm, source)
                for env in ["MiniGrid", "LunarLander"]
                for arm in ("IIF, Adam-preconditioned influence", "IIF, plain influence")
                for source in ("ours", "paper")
            ],
        ),
        ("table4_final_return_ci", [("MiniGrid",), ("LunarLander",), ("BipedalWalker",)]),
        # p = auto beside each hand-tuned p; standard PPO (the p ablation's) is the reference, not a row.
        (
            "robust_auto_vs_p",
            [
                (env, arm)
                for env in ["FrozenLake", "Acrobot", "MiniGrid", "LunarLander"]
                for arm in [f"IIF p = {p} %" for p in ("6.25", "12.5", "25", "50", "100")]
                + ["IIF, p = auto", "IIF + entropy guard, p = auto"]
            ],
        ),
        ("table5_runtime", [(env, source) for env in MAIN_ENV_TITLES for source in ("ours", "paper")]),
    ],
)
def test_table_rows(made, name, row_keys):
    rows = table(made[2], name)
    keys = [c for c in ("Env", "p (%)", "Arm", "Source") if c in rows.columns]
    assert [tuple(r) for r in rows[keys].itertuples(index=False)] == row_keys


def test_eval_cadence_thins_both_curves(made):
    # Every 2 rounds: standard PPO's levels are 2 and 4 (rounds 2, 4), IIF reaches both at round 2:
    # SE_ave = mean(0, 50) = 25 %. Every 4 (and 10, with 4 rounds): one level, both reach it at round 4.
    rows = table(made[2], "eval_cadence").set_index(["Env", "Evaluated every (rounds)"])
    frozenlake = rows.loc["FrozenLake"]
    assert frozenlake["Levels per seed"].tolist() == ["4.0", "2.0", "1.0", "1.0"]
    assert frozenlake["Evaluated every (% of the run)"].tolist() == ["25.0", "50.0", "100.0", "250.0"]
    assert frozenlake["SE_ave (%)"].tolist() == ["33.3 ± 0.0", "25.0 ± 0.0", "0.0 ± 0.0", "0.0 ± 0.0"]
    assert frozenlake["SE_ave shift per seed, mean (max)"].tolist() == [
        "0.0 (0.0)",
        "8.3 (8.3)",
        "33.3 (33.3)",
        "33.3 (33.3)",
    ]
    assert rows.index.get_level_values("Env").unique().tolist() == ["FrozenLake", "Acrobot", "MiniGrid", "LunarLander"]


def test_efficiency_table_values(made):
    rows = table(made[2], "fig6b_efficiency").set_index(["Env", "Source"])
    ours, theirs = rows.loc[("FrozenLake", "ours")], rows.loc[("FrozenLake", "paper")]
    assert ours[["Seeds", "SE_ave (%)", "SE_peak (%)", "RT_peak (%)", "Unreached levels"]].tolist() == [
        "5",
        "33.3 ± 0.0",
        "50.0 ± 0.0",
        "58.3 ± 0.0",
        "0 / 20",
    ]
    assert theirs[["Seeds", "SE_ave (%)", "Unreached levels"]].tolist() == ["5", "34.0 ± 2.0", "—"]
    # Evaluated every 2nd round (as eval_cadence's "every 2"): levels 2, 4; IIF reaches both at round 2.
    # Training time ignores evaluation, so RT_peak is FrozenLake's.
    walker = rows.loc[("BipedalWalker", "ours")]
    assert walker[["SE_ave (%)", "SE_peak (%)", "RT_peak (%)", "Unreached levels"]].tolist() == [
        "25.0 ± 0.0",
        "50.0 ± 0.0",
        "58.3 ± 0.0",
        "0 / 10",
    ]
    final_gain = table(made[2], "table4_final_return_ci").set_index("Env").loc["BipedalWalker", "Mean gain"]
    assert final_gain == "1.00"  # the last round (4) is evaluated: 5 − 4 on every seed


def test_protocol_table_pairs_each_protocol_and_the_authors_pairing(made):
    rows = table(made[2], "protocol_comparison")
    assert [tuple(r) for r in rows[["Env", "Protocol", "Arm"]].itertuples(index=False)] == [
        (env, pairing, arm)
        for env in ["FrozenLake", "Acrobot", "MiniGrid"]
        for pairing in ("clean vs PPO clean", "paper vs PPO paper", "paper vs PPO clean")
        for arm in ("IIF", "Random")
    ]
    iif = rows.set_index(["Env", "Protocol", "Arm"]).loc[("Acrobot", "paper vs PPO clean", "IIF")]
    # Every seed's IIF curve is the same shape (see CURVES): 33.3 % everywhere, no spread to resample.
    assert iif[
        [
            "Seeds",
            "SE_ave mean ± std",
            "SE_ave median",
            "SE_ave IQM [95 % CI]",
            "SE_ave without worst seed",
            "SE_ave of seed-mean curves",
            "SE_peak mean ± std",
            "Paper SE_ave",
        ]
    ].tolist() == ["5", "33.3 ± 0.0", "33.3", "33.3 [nan, nan]", "33.3", "33.3", "50.0 ± 0.0", "36.7 ± 6.5"]
    random = rows.set_index(["Env", "Protocol", "Arm"]).loc[("Acrobot", "clean vs PPO clean", "Random")]
    # OTHER_CURVE reaches levels 1 and 2 at rounds 2 and 4 (−100 % each) and never 3 or 4 (0 %).
    assert random[["SE_ave mean ± std", "Paper SE_ave"]].tolist() == ["-50.0 ± 0.0", "—"]
    parts = table(made[2], "protocol_parts_acrobot")
    assert list(parts["Protocol"].unique()) == [
        "clean vs PPO clean",
        "abandon vs PPO abandon",
        "samestarts vs PPO samestarts",
        "samenoise vs PPO samenoise",
        "paper vs PPO paper",
        "abandon vs PPO clean",
        "samestarts vs PPO clean",
        "samenoise vs PPO clean",
        "paper vs PPO clean",
    ]


@pytest.mark.parametrize(
    "name, envs, arms",
    [
        ("fig12_efficiency", ["FrozenLake", "MiniGrid"], ["IIF", "Advantage H1", "Advantage H2"]),
        ("fig13_efficiency", ["FrozenLake", "LunarLander"], ["IIF", "TD-error reweighting"]),
        ("fig6b_robust", MAIN_ENV_TITLES, ["IIF", "Random"]),
    ],
)
def test_filter_tables_compare_each_filter_with_standard_ppo(made, name, envs, arms):
    rows = table(made[2], name)
    assert [tuple(r) for r in rows[["Env", "Arm"]].itertuples(index=False)] == [(e, a) for e in envs for a in arms]
    # Only IIF has a paper number (Fig. 6b's); the paper printed none for the other filters.
    assert (rows.loc[rows["Arm"] != "IIF", "Paper SE_ave"] == "—").all()
    assert (rows.loc[rows["Arm"] == "IIF", "Paper SE_ave"] != "—").all()


def test_a_growing_study_uses_every_common_seed_and_the_paper_figures_their_count(made):
    tidy = load_tidy(made[1])
    extra = tidy[(tidy["env"] == "acrobot") & (tidy["seed"] == 4)].assign(seed=11)  # one more seed of every run
    grown = pd.concat([tidy, extra], ignore_index=True)
    protocol = next(o for o in OUTPUTS if o.name == "protocol_comparison").runs
    fig6b = next(o for o in OUTPUTS if o.name == "fig6b_efficiency").runs
    grown = FigureData(grown, made[1])
    assert sorted(protocol.select(grown).query("env == 'acrobot'")["seed"].unique()) == [0, 1, 2, 3, 4, 11]
    assert sorted(fig6b.select(grown).query("env == 'acrobot'")["seed"].unique()) == [0, 1, 2, 3, 4]


def test_collapse_table_counts_failed_seeds_with_a_wilson_interval():
    from rlinfluence.figures.arms import IIF, STANDARD
    from rlinfluence.figures.collapse import collapse_table, failure
    from rlinfluence.figures.control_runs import Runs

    def run(seed, arm, curve):
        return pd.DataFrame(
            {
                "env": "acrobot",
                "seed": seed,
                "arm": arm,
                "protocol": "clean",
                "round": range(len(curve)),
                "test_return": curve,
            }
        )

    stuck = [-500.0] * 21 + [-100.0]  # reaches −150 at round 21: too late
    fine = [-500.0, -400.0, -140.0] + [-100.0] * 19
    rows = pd.concat(
        [
            run(0, IIF.label, stuck),
            run(1, IIF.label, fine),
            run(2, IIF.label, stuck),
            run(0, STANDARD.label, fine),
            run(1, STANDARD.label, fine),
            run(2, STANDARD.label, fine),
        ]
    )
    runs = Runs("main", (IIF, STANDARD), envs_needed=("acrobot",), seeds_needed=3)
    output = OUTPUTS[0].__class__("x", "x", "x", runs, collapse_table)
    result = collapse_table(output, rows).set_index("Arm")
    assert result.loc["IIF", "Failed / seeds"] == "2 / 3" and result.loc["IIF", "Failed seeds"] == "0, 2"
    assert result.loc["IIF", "Rate [95 % Wilson CI]"] == "67 % [21, 94]"
    assert result.loc["Standard PPO", "Failed / seeds"] == "0 / 3"
    assert result.loc["IIF", "Failure"] == failure("acrobot").criterion == "test return < −150 up to round 20"


def test_p_ablation_paper_has_no_p_6_25_row(made):
    rows = table(made[2], "table2_p_ablation").set_index(["Env", "p (%)", "Source"])
    assert rows.loc[("MiniGrid", "6.25", "paper"), "SE_ave (%)"] == "—"
    assert rows.loc[("MiniGrid", "12.5", "paper"), "SE_ave (%)"] == "67.5 ± 5.1"
    assert rows.loc[("MiniGrid", "12.5", "ours"), "SE_ave (%)"] == "33.3 ± 0.0"


def test_final_return_ci_and_runtime_values(made):
    ci = table(made[2], "table4_final_return_ci").set_index("Env")
    assert ci.loc["LunarLander"].tolist() == ["5", "1.00", "[1.00, 1.00]", "[22.54, 130.52]"]
    runtime = table(made[2], "table5_runtime").set_index(["Env", "Source"]).loc[("Acrobot", "ours")]
    assert runtime.tolist() == [
        "5",
        "0.50 ± 0.00",
        "1.00 ± 0.00",
        "2.00 ± 0.00",
        "10.00 ± 0.00",
        "12.00 ± 0.00",
        "5.00 ± 0.00",
        "58.33 ± 0.00",
    ]


def test_regenerating_from_the_committed_csvs_is_byte_identical(made, tmp_path):
    _, data_dir, out_dir = made
    regenerate(data_dir, tmp_path / "fresh_clone")
    assert files(tmp_path / "fresh_clone") == files(out_dir)


def test_a_missing_experiment_is_reported_and_its_stale_files_removed(made, tmp_path):
    _, data_dir, out_dir = made
    shutil.copytree(data_dir, tmp_path / "data")
    (tmp_path / "data" / "adam.csv").unlink()
    shutil.copytree(out_dir, tmp_path / "out")  # an earlier regeneration that still had the Adam runs
    results = {name: status for name, status, _ in regenerate(tmp_path / "data", tmp_path / "out")}
    # The Adam-aware influence table shares Table 3's standard-PPO and plain-IIF runs: it goes missing too.
    adam_outputs = ["table3_adam", "table3_adam_preconditioner", "fig15_adam"]
    assert [name for name, status in results.items() if status == "missing"] == adam_outputs
    missing = (tmp_path / "out" / "MISSING.md").read_text()
    assert "`rlinfluence -m +experiment=adam`" in missing and "adam/minigrid" in missing
    assert "`rlinfluence -m +experiment=adam_preconditioner && rlinfluence -m +experiment=adam`" in missing
    assert not [p for p in (tmp_path / "out").iterdir() if p.stem in adam_outputs]


def test_a_figure_is_never_drawn_from_part_of_its_runs(made):
    tidy = load_tidy(made[1])
    one_seed_short = tidy[
        ~(
            (tidy["experiment"] == "main")
            & (tidy["env"] == "highway")
            & (tidy["method_tag"] == "random-p50")
            & (tidy["seed"] == 4)
        )
    ]
    fig6a = next(o for o in OUTPUTS if o.name == "fig6a_learning_curves")
    shortfalls = fig6a.runs.shortfalls(FigureData(one_seed_short, made[1]))
    assert list(shortfalls) == ["highway"]
    assert "main/highway" in shortfalls["highway"]
    assert "has 4 in common" in shortfalls["highway"] and "random-p50 4" in shortfalls["highway"]
    # The line names the command that makes the missing arm's runs alone, the way the committed ones were made.
    assert shortfalls["highway"].endswith(
        "`rlinfluence -m +experiment=main env=highway eval.episodes=50 method='random'`"
    )
    assert fig6a.runs.command_for("frozenlake") == "rlinfluence -m +experiment=main env=frozenlake"


def test_an_incomplete_env_is_left_out_of_the_output_and_listed(made, tmp_path):
    tidy = load_tidy(made[1])
    keep = ~((tidy["experiment"] == "main") & (tidy["env"] == "highway") & (tidy["seed"] == 4))
    (tmp_path / "data").mkdir()
    for experiment, rows in tidy[keep].groupby("experiment"):
        rows.to_csv(tmp_path / "data" / f"{experiment}.csv", index=False)
    results = {name: status for name, status, _ in regenerate(tmp_path / "data", tmp_path / "out")}
    assert results["fig6b_efficiency"] == "partial" and results["table3_adam"] == "made"
    assert "Highway" not in (tmp_path / "out" / "fig6b_efficiency.md").read_text()
    assert "Acrobot" in (tmp_path / "out" / "fig6b_efficiency.md").read_text()
    assert "main/highway: needs 5 seeds" in (tmp_path / "out" / "MISSING.md").read_text()


def test_progress_counts_finished_runs_against_needed_ones(made, tmp_path):
    every_run = [line for line in (made[2] / "PROGRESS.md").read_text().splitlines() if line.startswith("| `")]
    assert len(every_run) > 20 and all(" ✓ | " in line for line in every_run)
    assert "(100%)" in (made[2] / "PROGRESS.md").read_text()
    tidy = load_tidy(made[1])
    two_highway_runs_short = ~(
        (tidy["experiment"] == "main")
        & (tidy["env"] == "highway")
        & (tidy["seed"] == 4)
        & tidy["method_tag"].isin(["iif-p50", "random-p50"])
    )
    (tmp_path / "data").mkdir()
    for experiment, rows in tidy[two_highway_runs_short].groupby("experiment"):
        rows.to_csv(tmp_path / "data" / f"{experiment}.csv", index=False)
    regenerate(tmp_path / "data", tmp_path / "out")
    rows = {
        line.split(" | ")[1]: line
        for line in (tmp_path / "out" / "PROGRESS.md").read_text().splitlines()
        if line.startswith("| `rlinfluence -m +experiment=main` |")
    }
    # Fig. 6a needs PPO, IIF and random on 5 seeds: 15 runs, of which 13 are left.
    assert "| 13 / 15 |" in rows["highway"] and "fig6a_learning_curves" in rows["highway"]
    assert "| 15 / 15 ✓ |" in rows["acrobot"]


def test_unfinished_runs_are_skipped_and_listed(tmp_path):
    finished = write_run(tmp_path / "runs", "main", "acrobot", "ppo", seed=0)
    unfinished = write_run(tmp_path / "runs", "main", "acrobot", "iif-p50", seed=0, done=False)
    scan = scan_runs(tmp_path / "runs")
    assert (scan.finished, scan.unfinished) == ([finished], [unfinished])
    assert set(tidy_from_runs(tmp_path / "runs")["method_tag"]) == {"ppo"}
    results = regenerate(tmp_path / "data", tmp_path / "out", runs_root=tmp_path / "runs")
    assert {status for _, status, _ in results} == {"missing"}
    assert "main/acrobot/sgd/iif-p50/seed0" in (tmp_path / "out" / "MISSING.md").read_text()


def test_refreshing_replaces_runs_on_disk_and_keeps_the_others(tmp_path):
    write_run(tmp_path / "old", "main", "acrobot", "ppo", seed=0)
    write_run(tmp_path / "old", "main", "acrobot", "ppo", seed=1)
    refresh_from_runs(tmp_path / "old", tmp_path / "data", set()).write()
    # Seed 0 is rerun with different results; seed 1's run directory is not on this machine.
    write_run(tmp_path / "new", "main", "acrobot", "ppo", seed=0, curve=[0, 9, 9, 9, 9])
    refresh_from_runs(tmp_path / "new", tmp_path / "data", set()).write()
    tidy = load_tidy(tmp_path / "data")
    assert tidy.groupby("seed")["test_return"].max().to_dict() == {0: 9.0, 1: 14.0}


def test_refreshing_the_detection_csv_only_adds_the_new_runs_lines(tmp_path):
    """Committed detection rows are kept byte for byte: no column is added to them (the tidy CSVs'
    provenance columns have no values for detection rows)."""
    path = tmp_path / "data" / corruption.DETECTION_CSV
    lines = []
    for seed in (0, 1):
        run_dir = write_run(tmp_path / f"runs{seed}", "corruption_advantage_sign_0.1", "acrobot", "ppo", seed=seed)
        line = {"round": 1, "n_planted": 10, "precision": None, "recall": 0.0, "auroc_influence": 0.8}
        (run_dir / "corruption.jsonl").write_text(json.dumps(line | {"auroc_advantage": None, "planted": [1]}) + "\n")
        refresh_from_runs(tmp_path / f"runs{seed}", tmp_path / "data", set()).write()
        lines.append(path.read_text().splitlines())
    committed, refreshed = lines
    assert refreshed[0] == ",".join(corruption.DETECTION_COLUMNS)
    assert set(committed) < set(refreshed) and len(refreshed) == len(committed) + 1


def test_a_run_made_with_other_settings_never_replaces_the_committed_one(tmp_path):
    write_run(tmp_path / "old", "main", "acrobot", "ppo", seed=0, config_hash="aaaaaa")
    refresh_from_runs(tmp_path / "old", tmp_path / "data", set()).write()
    committed = (tmp_path / "data" / "main.csv").read_bytes()
    write_run(tmp_path / "new", "main", "acrobot", "ppo", seed=0, config_hash="bbbbbb", curve=[0, 9, 9, 9, 9])
    with pytest.raises(
        RunDirError,
        match="would replace main/acrobot/sgd/ppo/clean/0 of .*main.csv, made with config_hash "
        "aaaaaa, this has config_hash bbbbbb",
    ):
        refresh_from_runs(tmp_path / "new", tmp_path / "data", set()).write()
    assert (tmp_path / "data" / "main.csv").read_bytes() == committed


def test_the_runs_of_one_env_must_share_their_settings(tmp_path):
    """A seed run with another command (e.g. the default evaluation) would be compared with the others."""
    write_run(tmp_path / "runs", "main", "acrobot", "ppo", seed=0, config_hash="aaaaaa")
    write_run(tmp_path / "runs", "main", "acrobot", "iif-p50", seed=0, config_hash="aaaaaa")
    write_run(tmp_path / "runs", "main", "acrobot", "iif-p50", seed=1)
    write_run(tmp_path / "runs", "main", "lunarlander", "ppo", seed=0, config_hash="cccccc")  # another env may differ
    with pytest.raises(RunDirError, match=r"main/acrobot were made with different settings .*iif-p50 seed 1"):
        refresh_from_runs(tmp_path / "runs", tmp_path / "data", set()).write()
    assert not (tmp_path / "data" / "main.csv").exists()
    # Committed CSVs that mix settings (edited by hand, merged from two branches) are refused as well.
    write_run(tmp_path / "good", "main", "acrobot", "ppo", seed=0, config_hash="aaaaaa")
    refresh_from_runs(tmp_path / "good", tmp_path / "data", set()).write()
    mixed = pd.read_csv(tmp_path / "data" / "main.csv")
    mixed.assign(seed=1, config_hash="default").pipe(lambda rows: pd.concat([mixed, rows])).to_csv(
        tmp_path / "data" / "main.csv", index=False
    )
    with pytest.raises(RunDirError, match="different settings"):
        load_tidy(tmp_path / "data")


def test_committed_rows_without_a_config_hash_are_not_known_to_differ(tmp_path):
    write_run(tmp_path / "runs", "main", "acrobot", "ppo", seed=0, config_hash="aaaaaa")
    refresh_from_runs(tmp_path / "runs", tmp_path / "data", set()).write()
    committed = pd.read_csv(tmp_path / "data" / "main.csv")
    committed.assign(seed=1, config_hash=float("nan")).pipe(lambda rows: pd.concat([committed, rows])).to_csv(
        tmp_path / "data" / "main.csv", index=False
    )
    assert sorted(load_tidy(tmp_path / "data").drop_duplicates("seed")["config_hash"].fillna("")) == ["", "aaaaaa"]


def test_runs_no_figure_reads_stay_out_of_the_committed_data(tmp_path):
    """A quick look (`experiment_name=default`) must not leave a default.csv beside the paper's data."""
    write_run(tmp_path / "runs", "main", "acrobot", "ppo", seed=0)
    write_run(tmp_path / "runs", "default", "acrobot", "ppo", seed=0)
    regenerate(tmp_path / "data", tmp_path / "out", runs_root=tmp_path / "runs")
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["main.csv"]


def test_latex_tables_escape_what_latex_would_misread():
    latex = latex_table(pd.DataFrame({"SE_ave (%)": ["33.3 ± 0.0"]}), "Gain of IIF − std", label="tab:x")
    assert r"SE\_ave (\%)" in latex and r"33.3 $\pm$ 0.0" in latex and r"IIF $-$ std" in latex


def test_main_from_config_reads_the_figures_node(tmp_path):
    write_run(tmp_path / "runs", "main", "acrobot", "ppo", seed=0)
    cfg = OmegaConf.create(
        {
            "figures": {
                "data_dir": str(tmp_path / "data"),
                "out_dir": str(tmp_path / "out"),
                "runs_root": str(tmp_path / "runs"),
            }
        }
    )
    results = main_from_config(cfg)
    assert [name for name, _, _ in results] == [o.name for o in catalogue.OUTPUTS]
    assert (tmp_path / "data" / "main.csv").exists() and (tmp_path / "out" / "MISSING.md").exists()


def test_paper_table5_rt_peak_is_its_time_to_peak_over_the_whole_standard_run():
    # docs/metrics.md#runtime: the paper's RT_peak column is 1 − (IIF time to peak) / (standard total time);
    # this guards the transcription of the Table 5 numbers.
    for row in paper.TABLE5.values():
        rt_peak = (1 - row["to_peak_iif"][0] / row["total_std"][0]) * 100
        assert rt_peak == pytest.approx(row["RT_peak"][0], abs=0.2)


def test_two_runs_claiming_the_same_seed_are_an_error(tmp_path):
    write_run(tmp_path / "runs", "main", "acrobot", "ppo", seed=0)
    shutil.copytree(tmp_path / "runs" / "main", tmp_path / "runs" / "backup" / "main")
    with pytest.raises(
        RunDirError,
        match=r"several runs share experiment/env/optimizer/method_tag/protocol/seed "
        r"main/acrobot/sgd/ppo/clean/0 \(.*/backup/main/acrobot/sgd/ppo/seed0, ",
    ):
        tidy_from_runs(tmp_path / "runs")


def test_a_summary_over_seeds_says_how_many_seeds_have_no_value():
    # e.g. Table 5's time to the standard peak, which a seed that never reaches the peak does not have
    assert pm_over_seeds(pd.Series([1.0, 3.0]), 1) == "2.0 ± 1.4"
    assert pm_over_seeds(pd.Series([1.0, 3.0, float("nan")]), 1) == "2.0 ± 1.4 (none for 1 of 3 seeds)"
    assert pm_over_seeds(pd.Series([float("nan")] * 5), 2) == "none (5 of 5 seeds)"


def test_probability_of_improvement_compares_every_pair_of_seeds(made):
    # Areas (mean return over rounds 1-4) of seed s: IIF 4 + 10s, standard 2.5 + 10s, random 1.25 + 10s.
    # IIF seed i beats standard seed j when i >= j (15 of 25 pairs), random when i > j (10 of 25).
    rows = table(made[2], "aggregates_improvement").set_index("Env")
    assert rows.index.tolist() == MAIN_ENV_TITLES + ["All envs (mean)"]
    assert rows["P(IIF > standard) [95 % CI]"].str.startswith("0.60 [").all()
    assert rows["P(Random > standard) [95 % CI]"].str.startswith("0.40 [").all()


def test_filters_leaderboard_scores_every_arm_of_every_env_against_standard(made):
    rows = table(made[2], "filters_leaderboard").set_index(["Env", "Method"])
    envs = ["FrozenLake", "Acrobot", "MiniGrid", "LunarLander", "DoorKey-5x5"]
    labels = [arm.label for arm in filters.FILTER_ARMS]
    assert set(rows.index) == {(env, label) for env in envs + ["All envs"] for label in labels} | {
        (env, "Standard PPO") for env in envs
    }
    # The areas of write_run's curves: both IIF arms (write_run draws iif-ep-* with IIF's curve) beat standard PPO
    # in 15 of 25 seed pairs, the other filters in 10.
    iif_arms = {"IIF", "IIF, episodes"}
    for env in envs + ["All envs"]:
        for label in labels:
            expected = "0.60 [" if label in iif_arms else "0.40 ["
            assert rows.loc[(env, label), "P(> standard), AUC [95 % CI]"].startswith(expected), (env, label)
    iif, consensus = rows.loc[("DoorKey-5x5", "IIF")], rows.loc[("DoorKey-5x5", "Consensus")]
    assert iif[["Seeds", "SE_ave median", "Kept %", "s / round"]].tolist() == [
        "5",
        "33.3",
        "97.7",  # n_kept / n_records = 2000 / 2048 every round
        "2.50",  # TIMES: IIF 1 + 0.5 + 1 s
    ]
    assert consensus["s / round"] == "3.00"  # write_run's default 1 + 0 + 2 s
    assert rows.loc[("All envs", "IIF"), "s / round"] == "—"  # seconds of different envs do not add up
    # Only FrozenLake and Acrobot have a failure criterion (figures.collapse); no synthetic seed fails it.
    assert rows.loc[("FrozenLake", "Consensus"), "Failed / seeds"] == "0 / 5"
    assert rows.loc[("MiniGrid", "Consensus"), "Failed / seeds"] == "—"
    assert rows.loc[("All envs", "Consensus"), "Failed / seeds"] == "0 / 10"
    assert rows.loc[("All envs", "IIF"), "Seeds"] == "25"


def test_three_way_table_scores_each_source_over_the_authors_rounds(made):
    rows = table(made[2], "fidelity_three_way").set_index(["Env", "Source"])
    assert rows.index.tolist() == [
        (env, source)
        for env in ("MiniGrid", "LunarLander")
        for source in (
            "paper",
            "authors' code",
            "ours, clean protocol",
            "ours, paper protocol",
            "ours, clean protocol (Fig. 6b)",
        )
    ]
    # The authors' IIF tests as their standard PPO does: no level reached sooner.
    authors = rows.loc[("MiniGrid", "authors' code")]
    assert authors[["Rounds", "Seeds", "SE_ave mean ± std", "SE_ave per seed"]].tolist() == [
        "0–3",
        "5",
        "0.0 ± 0.0",
        "0.0, 0.0, 0.0, 0.0, 0.0",
    ]
    # Ours over rounds 0-3: standard levels 1, 2, 3 at rounds 1, 2, 3; IIF reaches them at 1, 1, 2.
    clean = rows.loc[("MiniGrid", "ours, clean protocol")]
    assert clean[["Rounds", "SE_ave mean ± std", "SE_peak mean ± std", "Final IIF − std per seed"]].tolist() == [
        "0–3",
        "27.8 ± 0.0",
        "33.3 ± 0.0",
        "2.00, 2.00, 2.00, 2.00, 2.00",
    ]
    whole = rows.loc[("MiniGrid", "ours, clean protocol (Fig. 6b)")]
    assert whole[["Rounds", "SE_ave mean ± std"]].tolist() == ["0–4", "33.3 ± 0.0"]
    assert rows.loc[("LunarLander", "paper"), "SE_ave mean ± std"] == "26.0 ± 1.8"


def test_sb3_dropin_table_scores_stock_sb3_beside_ours_and_the_paper(made):
    rows = table(made[2], "sb3_dropin").set_index(["Env", "Source"])
    sources = ("paper", "stock SB3 + IIF vs stock SB3", "ours: IIF vs standard PPO")
    assert rows.index.tolist() == [(env, source) for env in ("FrozenLake", "LunarLander") for source in sources]
    # Stock SB3's standard levels 1, 2, 3 at rounds 1, 2, 3; its IIF reaches them at 1, 1, 2.
    for env in ("FrozenLake", "LunarLander"):
        sb3 = rows.loc[(env, "stock SB3 + IIF vs stock SB3")]
        assert sb3[["Rounds", "Seeds", "SE_ave mean ± std", "SE_ave per seed", "SE_peak mean ± std"]].tolist() == [
            "0–3",
            "5",
            "27.8 ± 0.0",
            "27.8, 27.8, 27.8, 27.8, 27.8",
            "33.3 ± 0.0",
        ]
        assert sb3["SE_ave IQM [95 % CI]"].startswith("27.8 [")  # equal seeds: scipy's bootstrap CI is degenerate
    assert rows.loc[("FrozenLake", "paper"), "SE_ave mean ± std"] == "34.0 ± 2.0"
    assert rows.loc[("LunarLander", "paper"), "SE_ave mean ± std"] == "26.0 ± 1.8"


def test_alignment_table_reads_the_filtering_arm_one_round_early(made):
    rows = table(made[2], "fidelity_alignment").set_index(["Env", "Source", "Arm"])
    authors = rows.loc[("MiniGrid", "authors' code", "IIF")]
    # The authors' IIF equals their standard PPO; read one round early it reaches levels 2 and 3 a round sooner.
    assert authors["SE_ave, θ^k at round k"].startswith("0.0 ± 0.0")
    assert authors["SE_ave, one round early"].startswith("27.8 ± 0.0")
    assert rows.index.tolist() == [
        (env, source, arm)
        for env in ("MiniGrid", "LunarLander")
        for source, arm in (
            ("authors' code", "IIF"),
            ("ours, clean protocol", "IIF"),
            ("ours, clean protocol", "Random"),
        )
    ]


def test_corruption_tables_score_detection_and_recovery(made):
    detection = table(made[2], "corruption_detection").set_index(["Env", "Planted", "Kind", "Arm"])
    iif = detection.loc[("FrozenLake", "10 %", "advantage_sign", "IIF")]
    ppo = detection.loc[("FrozenLake", "10 %", "advantage_sign", "Standard PPO")]
    assert iif[["Seeds", "Precision of drops", "Recall of drops", "AUROC −influence"]].tolist() == [
        "5",
        "0.500 ± 0.000",
        "0.250 ± 0.000",
        "0.800 ± 0.000",
    ]
    assert ppo[["Precision of drops", "Recall of drops"]].tolist() == ["—", "0.000 ± 0.000"]
    assert iif["AUROC advantage heuristic"] == "none (5 of 5 seeds)"
    assert detection.loc[("Acrobot", "20 %", "advantage_sign", "Random"), "Precision of drops"] == "0.100 ± 0.000"
    assert len(detection) == 3 * 3 * 3 + 2 * 2  # envs x advantage-sign shares x arms + the reward kind's
    assert detection.loc[("LunarLander", "10 %", "reward", "IIF"), "Recall of drops"] == "0.250 ± 0.000"
    recovery = table(made[2], "corruption_recovery").set_index(["Env", "Data"])
    # write_run's curves: seed s is CURVES + 10 s; rounds 1-4 of standard PPO average 2.5 + 10 s.
    assert recovery.loc[("Acrobot", "clean"), "Standard PPO: mean over rounds"] == "22.500 ± 15.811"
    assert recovery.loc[("Acrobot", "5 % planted"), "IIF: final"] == "25.000 ± 15.811"
    assert ("FrozenLake", "10 % planted (rewards)") not in recovery.index  # the reward kind skips FrozenLake
    assert recovery.loc[("Acrobot", "clean"), "Random: mean over rounds"] != "—"
    index = (made[2] / "INDEX.md").read_text()
    assert "env=lunarlander corruption.fraction=0.2 eval.episodes=50" in index
    assert "env=acrobot corruption.kind=reward method=ppo,iif corruption.fraction=0.1 eval.episodes=100" in index


def test_grpo_table_compares_filtering_with_each_baseline(made):
    rows = table(made[2], "grpo_tiny").set_index(["Baseline", "Arm"])
    assert rows.index.tolist() == [
        (baseline, arm) for baseline in ("collected", "recompute") for arm in ("GRPO", "GRPO + IIF", "GRPO + random")
    ]
    # lm_rows: IIF keeps half; a round is 0.5 + 0.2 + 1.0 + 1.0 s, influence 1.0 of it.
    assert rows.loc[("collected", "GRPO + IIF"), ["Seeds", "Kept", "Round (s)", "Influence / round"]].tolist() == [
        "5",
        "50 %",
        "2.70 ± 0.00",
        "37 %",
    ]
    assert rows.loc[("recompute", "GRPO"), ["Kept", "Influence / round"]].tolist() == ["100 %", "—"]
    # Standard GRPO reaches its own peak at the round of its best test return (lm_rows draws them at random).
    lm = pd.read_csv(made[1] / LM_CSV)
    grpo = lm[(lm["experiment"] == "grpo_tiny_collected") & (lm["method"] == "ppo") & (lm["round"] > 0)]
    peaks = grpo.loc[grpo.groupby("seed")["test_return"].idxmax(), "round"]
    assert rows.loc[("collected", "GRPO"), "Rounds to GRPO's peak"] == pm_over_seeds(peaks, 1)


def test_planted_lm_table_scores_iif_drops_beside_clean_data(made):
    rows = table(made[2], "corruption_lm_tiny").set_index(["Data", "Arm"])
    arms = ("IIF", "Random", "Standard PPO")
    assert rows.index.tolist() == [(d, a) for d in ("10 % planted", "clean") for a in arms]
    assert rows.loc[("10 % planted", "Random"), "Precision of drops"] == "0.100 ± 0.000"
    planted = rows.loc[("10 % planted", "IIF")]
    assert planted[["Seeds", "Precision of drops", "Recall of drops", "AUROC −influence"]].tolist() == [
        "5",
        "0.500 ± 0.000",
        "0.250 ± 0.000",
        "0.800 ± 0.000",
    ]
    assert rows.loc[("clean", "IIF"), "Recall of drops"] == "—"
    assert rows.loc[("clean", "Standard PPO"), "Final test toxicity"] == "0.300 ± 0.000"  # lm_rows: 0.5 − 0.05·4


def sections(out_dir: Path, name: str) -> dict[str, pd.DataFrame]:
    """A written Markdown output of several tables back as {heading: table of strings}."""
    parts = (out_dir / f"{name}.md").read_text().split("\n## ")[1:]
    found = {}
    for part in parts:
        lines = [line for line in part.splitlines() if line.startswith("|")]
        cells = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]
        found[part.splitlines()[0].split(":")[0]] = pd.DataFrame(cells[2:], columns=cells[0])
    return found


LEAD_SECTIONS = ["Lead 1", "Lead 2", "Lead 3", "Also"]


def test_fidelity_leads_score_each_lead_beside_the_runs_it_would_change(made):
    found = sections(made[2], "fidelity_leads")
    assert list(found) == LEAD_SECTIONS
    lead1 = found["Lead 1"].set_index(["Env", "Arm", "Standard PPO"])
    columns = [
        "Rounds",
        "Seeds",
        "SE_ave mean ± std",
        "SE_peak mean ± std",
        "Unreached levels",
        "Arm − std, mean return",
    ]
    trained, main = fidelity_leads.TRAIN_ENV_SOURCE, fidelity_leads.MAIN_SOURCE
    # The other-env baseline sets one level, at round 4: IIF reaches it at round 2, random never. The main
    # comparison's sets levels 1-4 at rounds 1-4: IIF reaches them at 1, 1, 2, 2, random at 2, 4 and never.
    assert lead1.loc[("FrozenLake", "IIF", trained), columns].tolist() == ["0–4", "5", "50.0 ± 0.0", "50.0 ± 0.0"] + [
        "0 / 5",
        "3.00",
    ]
    assert lead1.loc[("FrozenLake", "IIF", main), columns].tolist() == ["0–4", "5", "33.3 ± 0.0", "50.0 ± 0.0"] + [
        "0 / 20",
        "1.50",
    ]
    assert lead1.loc[("FrozenLake", "Random", trained), columns].tolist() == ["0–4", "5", "0.0 ± 0.0", "0.0 ± 0.0"] + [
        "5 / 5",
        "0.25",
    ]
    assert lead1.loc[("FrozenLake", "Random", main), columns].tolist() == ["0–4", "5", "-50.0 ± 0.0", "0.0 ± 0.0"] + [
        "10 / 20",
        "-1.25",
    ]
    assert lead1.loc[("FrozenLake", "IIF", main), "Paper SE_ave"] == "34.0 ± 2.0"
    # Highway's baseline has a round fewer: both baselines are scored over rounds 0-3, on its 2 seeds.
    assert lead1.loc[("Highway", "IIF", trained), ["Rounds", "Seeds", "SE_ave mean ± std"]].tolist() == [
        "0–3",
        "2",
        "33.3 ± 0.0",
    ]
    assert lead1.loc[("Highway", "IIF", main), ["Rounds", "SE_ave mean ± std"]].tolist() == ["0–3", "27.8 ± 0.0"]

    lead2 = found["Lead 2"]
    assert lead2[["Env", "Code", "Arm"]].drop_duplicates().values.tolist() == [
        ["MiniGrid", "ours", "IIF"],
        ["MiniGrid", "ours", "Random"],
        ["MiniGrid", "authors' code", "IIF"],
        ["LunarLander", "ours", "IIF"],
        ["LunarLander", "ours", "Random"],
    ]
    # The authors' IIF at their committed runs' 100 episodes tests as their standard PPO; at 1,000 it gains.
    theirs = lead2[lead2["Code"] == "authors' code"]
    assert theirs[["Test episodes", "Seeds", "SE_ave mean ± std"]].values.tolist() == [
        ["100", "1", "0.0"],
        ["1000", "1", "27.8"],
    ]
    assert theirs["Standard PPO's best test return"].tolist() == ["3.00", "3.00"]
    ours = lead2[lead2["Code"] == "ours"]
    for env in ("minigrid", "lunarlander"):
        episodes = ours.loc[ours["Env"] == paper.ENV_TITLES[env], "Test episodes"].tolist()
        # each arm at the committed runs' CPU evaluation, then at the preset's
        assert episodes[:2] == [str(fidelity_leads.episodes_of(env, main)), str(preset(env).env.eval_episodes)]
        assert episodes[0] != episodes[1]
    iif = ours[ours["Arm"] == "IIF"]
    assert iif["SE_ave mean ± std"].unique().tolist() == ["33.3 ± 0.0"]
    assert iif["SE_ave std / paper's ±"].unique().tolist() == ["0.0"]
    assert ours.loc[ours["Arm"] == "Random", "SE_ave mean ± std"].unique().tolist() == ["-50.0 ± 0.0"]

    # Without clipping, the fixture's SB3 + IIF tests as its stock SB3: the variants are read apart.
    lead3 = found["Lead 3"].set_index(["Env", "Source"])
    assert lead3.loc[("FrozenLake", fidelity_leads.SB3_SOURCE), "SE_ave mean ± std"] == "27.8 ± 0.0"
    assert lead3.loc[("FrozenLake", fidelity_leads.SB3_NO_CLIPPING_SOURCE), "SE_ave mean ± std"] == "0.0 ± 0.0"
    assert lead3.loc[("LunarLander", "paper"), "SE_ave mean ± std"] == "26.0 ± 1.8"

    spreads = found["Also"].set_index(["Env", "Source"])
    # The authors' fixture IIF tests as their standard PPO: every statistic 0; ours gains 33.3 on every seed.
    assert spreads.loc[("MiniGrid", "authors' code"), ["Per-seed SE_ave mean", "Std over seeds"]].tolist() == [
        "0.0",
        "0.0",
    ]
    ours = spreads.loc[("LunarLander", fidelity_leads.OURS_SOURCE)]
    assert ours[["Per-seed SE_ave mean", "Standard error"]].tolist() == ["33.3", "0.0"]
    assert ours["SE_ave of the seed-mean curves [95 % CI]"].startswith("33.3 [")
    assert ours["Paper SE_ave"] == "26.0 ± 1.8"


def test_fidelity_leads_without_their_runs_say_not_run_yet(made, tmp_path):
    _, data_dir, _ = made
    shutil.copytree(data_dir, tmp_path / "data")
    (tmp_path / "data" / "eval_noise.csv").unlink()
    (tmp_path / "data" / "authors_eval_noise.csv").unlink()
    train_env = pd.read_csv(tmp_path / "data" / "fidelity_train_env.csv")
    kept = train_env[(train_env["env"] == "frozenlake") & (train_env["seed"] == 0)]
    kept.to_csv(tmp_path / "data" / "fidelity_train_env.csv", index=False)
    sb3 = pd.read_csv(tmp_path / "data" / "sb3.csv")
    sb3[sb3["protocol"] == "sb3"].to_csv(tmp_path / "data" / "sb3.csv", index=False)
    results = {name: status for name, status, _ in regenerate(tmp_path / "data", tmp_path / "out")}
    assert results["fidelity_leads"] == "made"  # the references are complete; the leads' runs are still arriving
    found = sections(tmp_path / "out", "fidelity_leads")
    lead1 = found["Lead 1"]
    assert set(lead1.loc[lead1["Env"] == "FrozenLake", "Seeds"]) == {"1 of 5 (partial: runs still arriving)"}
    highway = lead1[lead1["Env"] == "Highway"]["Seeds"].tolist()
    assert highway == ["0: not run yet (`rlinfluence -m +experiment=fidelity_train_env_highway env=highway`)"]
    lead2 = found["Lead 2"].set_index(["Env", "Code"])
    assert (
        lead2.loc[("LunarLander", "ours"), "Seeds"]
        == "0: not run yet (`rlinfluence -m +experiment=eval_noise env=lunarlander`)"
    )
    assert "CPU-hours" in lead2.loc[("LunarLander", "ours"), "Cost"]
    theirs = lead2.loc[("MiniGrid", "authors' code"), "Seeds"]
    assert theirs.startswith("0: not run yet (`python benchmarks/authors_pipeline/driver.py run ")
    assert theirs.endswith(
        "--test-episodes 1000 && python benchmarks/authors_pipeline/convert.py --work <work> --venv <venv> "
        "--experiment authors_eval_noise`)"
    )
    unclipped = found["Lead 3"].set_index(["Env", "Source"]).loc[("FrozenLake", fidelity_leads.SB3_NO_CLIPPING_SOURCE)]
    assert unclipped["Seeds"].endswith("--no-grad-clipping`)") and unclipped["SE_ave mean ± std"] == "—"
    assert "fidelity_leads" not in (tmp_path / "out" / "MISSING.md").read_text()


def test_a_declared_variant_is_compared_within_its_protocol(tmp_path):
    # sb3.csv's clipped and unclipped studies have settings of their own; within one variant they must agree.
    (tmp_path / "data").mkdir()
    write_sb3_runs(tmp_path / "data")
    assert load_tidy(tmp_path / "data").groupby("protocol")["config_hash"].nunique().tolist() == [1, 1]
    sb3 = pd.read_csv(tmp_path / "data" / "sb3.csv", dtype={"config_hash": str})
    sb3.loc[(sb3["protocol"] == "sb3") & (sb3["seed"] == 0), "config_hash"] = "other1"
    sb3.to_csv(tmp_path / "data" / "sb3.csv", index=False)
    with pytest.raises(RunDirError, match="the runs of sb3/frozenlake/sb3 were made with different settings"):
        load_tidy(tmp_path / "data")


def test_curve_bands_stay_within_the_seeds_range_and_redraw_byte_identical(tmp_path):
    """A return bounded in [0, 1], one seed of five collapsed to 0 (Fig. 6a's FrozenLake IIF): a 95 % t-interval
    of the mean would run past 1.3; the band is the seeded percentile bootstrap, with each seed's curve drawn."""
    rounds = np.arange(6)
    rows = pd.DataFrame(
        [
            {"env": "frozenlake", "arm": arm, "seed": seed, "round": k, "test_return": value}
            for arm, collapsed in (("IIF", 3), ("Standard PPO", None))
            for seed in range(5)
            for k, value in zip(rounds, np.minimum(1.0, rounds / 3) * (seed != collapsed) * (1 - 0.001 * seed))
        ]
    )
    figure = curves_figure(rows, ("frozenlake",), ["Standard PPO", "IIF"], "bands")
    [ax] = figure.axes
    bands = np.concatenate([np.asarray(path.vertices)[:, 1] for band in ax.collections for path in band.get_paths()])
    assert len(ax.collections) == 2 and bands.min() >= 0.0 and bands.max() <= 1.0
    assert sum(np.size(line.get_xdata()) == len(rounds) for line in ax.lines) == 2 * 5 + 2  # each seed, each mean
    first = save_figure(figure, tmp_path / "first")
    again = save_figure(curves_figure(rows, ("frozenlake",), ["Standard PPO", "IIF"], "bands"), tmp_path / "again")
    assert all(filecmp.cmp(a, b, shallow=False) for a, b in zip(first, again, strict=True))
