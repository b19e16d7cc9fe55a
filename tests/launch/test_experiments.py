"""Experiment overlays: `rlinfluence -m +experiment=<name>` launches exactly the runs its paper
result needs. Checked by expanding each overlay's sweep as the CLI does (launch.manifest.expand_sweep,
Hydra's basic sweeper's cartesian product), and composing and validating every job."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from rlinfluence.config.paths import CONFIG_DIR
from rlinfluence.figures.catalogue import RUN_OUTPUTS
from rlinfluence.launch.manifest import expand_sweep
from rlinfluence.run.identity import digest
from rlinfluence.run.rundir import method_tag, protocol_tag, run_leaf
from rlinfluence.validation import validate

MAIN_ENVS = ["frozenlake", "acrobot", "minigrid", "highway", "lunarlander", "bipedalwalker"]
P_ABLATION_ENVS = ["frozenlake", "acrobot", "minigrid", "lunarlander"]
PAPER_P = {
    "doorkey": 12.5,
    "frozenlake": 50,
    "acrobot": 50,
    "minigrid": 12.5,
    "highway": 50,
    "lunarlander": 12.5,
    "bipedalwalker": 6.25,
}


def runs(envs, tags, seeds, optimizer=None):
    """(env, optimizer, method_tag, seed) of a product; '{p}' in a tag is the env's paper p."""
    return {
        (
            env,
            optimizer or ("adam" if env in ("bipedalwalker", "doorkey") else "sgd"),
            tag.format(p=f"{PAPER_P[env]:g}"),
            seed,
        )
        for env in envs
        for tag in tags
        for seed in range(seeds)
    }


FILTER_ARMS = ["random-p25", "consensus-p{p}", "iif-ep-p{p}", "consensus-ep-p{p}"]
CORRUPTION_HASHES = {
    fraction: digest({"corruption.fraction": fraction}) for fraction in (0.05, 0.1, 0.2)
}  # corruption.kind=advantage_sign is its default
# The hashes of env.lm.algorithm=grpo with each env.lm.grpo.drop_baseline, the settings off the env's defaults.
GRPO_HASHES = {"collected": "d8dc63", "recompute": "b67183"}
# corruption.kind=reward (off the default) and each fraction, in the tiny RLHF world.
LM_CORRUPTION_HASHES = {0.0: "503fb3", 0.1: "43ca59"}
EXPECTED = {
    "main": runs(MAIN_ENVS, ["iif-p{p}", "ppo", "random-p{p}"], 5),
    "p_ablation": runs(P_ABLATION_ENVS, ["ppo", "iif-p6.25", "iif-p12.5", "iif-p25", "iif-p50", "iif-p100"], 3),
    "adam": runs(["minigrid", "lunarlander"], ["ppo", "iif-p{p}"], 5, optimizer="adam"),
    # The hash is of influence.preconditioner=adam, the one setting off the env's defaults.
    "adam_preconditioner": runs(["minigrid", "lunarlander"], ["iif-p{p}-3a5012"], 3, optimizer="adam"),
    "heuristics_advantage": runs(
        ["frozenlake", "minigrid"], ["ppo", "iif-p{p}", "advantage-h1-p{p}", "advantage-h2-p{p}"], 3
    ),
    "heuristics_td_error": runs(["frozenlake", "lunarlander"], ["ppo", "iif-p{p}", "td_error"], 3),
    "protocol": runs(
        ["frozenlake", "acrobot", "minigrid"],
        ["iif-p{p}", "ppo", "random-p{p}", "iif-p{p}-paper", "ppo-paper", "random-p{p}-paper"],
        10,
    ),
    "protocol_parts": runs(
        ["acrobot", "frozenlake"],
        [f"{tag}-{part}" for tag in ("iif-p{p}", "ppo") for part in ("abandon", "samestarts", "samenoise")],
        10,
    ),
    "collapse": runs(["frozenlake"], ["iif-p{p}", "iif-p{p}-paper"], 30),
    "protocol_lunarlander": runs(["lunarlander"], ["iif-p{p}-paper", "ppo-paper", "random-p{p}-paper"], 5),
    "robust": runs(P_ABLATION_ENVS, ["iif_guard-p{p}", "iif-pauto", "iif_guard-pauto"], 5),
    "robust_collapse": runs(["frozenlake"], ["iif_guard-p{p}", "iif-pauto", "iif_guard-pauto"], 30),
    "robust_guard_frozenlake": {("frozenlake", "sgd", "iif_guard-p50", seed) for seed in range(30, 35)},
    # Each fraction's hash: corruption.fraction, the one setting off the env's defaults.
    "corruption": runs(
        ["frozenlake", "acrobot", "lunarlander"],
        [f"{tag}-{digest}" for tag in ("ppo", "iif-p{p}", "random-p{p}") for digest in CORRUPTION_HASHES.values()],
        5,
    ),
    "grpo_tiny": {
        ("toxicity_tiny", "adam", f"{tag}-{GRPO_HASHES[baseline]}", seed)
        for tag in ("ppo", "iif-p100", "random-p100")
        for baseline in GRPO_HASHES
        for seed in range(5)
    },
    "corruption_lm_tiny": {
        ("toxicity_tiny", "adam", f"{tag}-{digest}", seed)
        for tag in ("ppo", "iif-p100", "random-p100")
        for digest in LM_CORRUPTION_HASHES.values()
        for seed in range(5)
    },
    # The presets' own 1,000 test episodes: no setting off the env's defaults, the experiment tells them apart.
    "eval_noise": runs(["minigrid", "lunarlander"], ["ppo", "iif-p{p}", "random-p{p}"], 5),
    # The hash is of env.train_make_kwargs.is_slippery, the one setting off the env's defaults.
    "fidelity_train_env": runs(["frozenlake"], [f"ppo-{digest({'env.train_make_kwargs.is_slippery': True})}"], 5),
    # The hash is of the collection env's traffic and the 30 rounds and 50 test episodes issue 42 declares.
    "fidelity_train_env_highway": runs(
        ["highway"],
        [f"ppo-{digest({'env.rounds': 30, 'env.train_make_kwargs.config.vehicles_count': 50, 'eval.episodes': 50})}"],
        2,
    ),
    # The benchmark of rollout filters: the new arms beside the main comparison's, DoorKey's seven on their own.
    "filters": runs(P_ABLATION_ENVS, FILTER_ARMS, 5),
    "filters_doorkey": runs(["doorkey"], ["ppo", "iif-p{p}", "random-p{p}", *FILTER_ARMS], 5),
    # The same seven arms on 20 seeds of five envs, one env a block.
    "twenty_seeds": runs(
        ["frozenlake", "acrobot", "minigrid", "lunarlander", "doorkey"],
        ["ppo", "iif-p{p}", "random-p{p}", *FILTER_ARMS],
        20,
    ),
}
JOB_COUNTS = {
    "main": 90,
    "p_ablation": 72,
    "adam": 20,
    "adam_preconditioner": 6,
    "heuristics_advantage": 24,
    "heuristics_td_error": 18,
    "protocol": 180,
    "protocol_parts": 120,
    "collapse": 60,
    "protocol_lunarlander": 15,
    "robust": 60,
    "robust_collapse": 90,
    "robust_guard_frozenlake": 5,
    "corruption": 135,
    "grpo_tiny": 30,
    "corruption_lm_tiny": 30,
    "eval_noise": 30,
    "fidelity_train_env": 5,
    "fidelity_train_env_highway": 2,
    "filters": 80,
    "filters_doorkey": 35,
    "twenty_seeds": 700,
}
# Which paper result each overlay feeds (its header comment must say so).
FEEDS = {
    "main": ["Fig. 6", "Table 4", "Table 5"],
    "p_ablation": ["Table 2", "Fig. 14"],
    "adam": ["Table 3", "Fig. 15"],
    "adam_preconditioner": ["Table 3"],
    "heuristics_advantage": ["Fig. 12"],
    "heuristics_td_error": ["Fig. 13"],
    "protocol": ["protocol_comparison", "protocol_curves", "collapse_acrobot"],
    "protocol_parts": ["protocol_parts_acrobot", "protocol_parts_frozenlake"],
    "collapse": ["collapse_frozenlake"],
    "protocol_lunarlander": ["protocol_comparison_lunarlander"],
    "robust": ["robust_efficiency", "robust_curves"],
    "robust_collapse": ["robust_collapse_frozenlake"],
    "robust_guard_frozenlake": ["robust IIF"],
    "corruption": ["Planted bad data", "issue 35"],
    "grpo_tiny": ["issue 35"],
    "corruption_lm_tiny": ["Planted bad data", "issue 35"],
    "eval_noise": ["issue 42", "lead 2"],
    "fidelity_train_env": ["issue 42", "lead 1"],
    "fidelity_train_env_highway": ["issue 42", "lead 1"],
    "filters": ["issue 46"],
    "filters_doorkey": ["issue 46"],
    "twenty_seeds": ["filter leaderboard"],
}
# The run folder an overlay's runs go to, where it is not the overlay's name: the protocol study
# extends the main comparison.
EXPERIMENT_NAME = {
    "protocol": "main",
    "protocol_parts": "main",
    "collapse": "main",
    "protocol_lunarlander": "main",
    "robust": "main",
    "robust_collapse": "main",
    "robust_guard_frozenlake": "main",
    "fidelity_train_env_highway": "fidelity_train_env",
    "filters_doorkey": "filters",
}
OVERLAY_DIR = Path(CONFIG_DIR) / "experiment"


def expected_experiment(name: str, cfg) -> str:
    """The experiment a job of overlay `name` writes to: the studies that sweep a setting a figure compares
    across (not within) name one experiment per value of it."""
    per_setting = {
        "corruption": lambda: f"corruption_{cfg.corruption.kind}_{cfg.corruption.fraction}",
        "grpo_tiny": lambda: f"grpo_tiny_{cfg.env.lm.grpo.drop_baseline}",
        "corruption_lm_tiny": lambda: f"corruption_lm_tiny_{cfg.corruption.fraction}",
    }
    return per_setting[name]() if name in per_setting else EXPERIMENT_NAME.get(name, name)


def expand(name: str) -> list:
    """The composed config of every job of `-m +experiment=<name>`.

    Jobs that differ only in the seed are composed once and copied with each seed (composition is
    the slow part, ~0.1 s a job)."""
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        overlay = compose("config", overrides=[f"+experiment={name}"], return_hydra_config=True)
        composed, configs = {}, []
        for job in expand_sweep(overlay.hydra.sweeper.params, []):
            seed = [int(o.split("=")[1]) for o in job if o.startswith("seed=")]
            rest = tuple(o for o in job if not o.startswith("seed="))
            if rest not in composed:
                composed[rest] = compose("config", overrides=[f"+experiment={name}", *rest])
            cfg = composed[rest].copy()
            cfg.seed = seed[0] if seed else cfg.seed
            configs.append(cfg)
        return configs


@pytest.fixture(scope="module")
def jobs():
    return {name: expand(name) for name in JOB_COUNTS}


def test_every_overlay_is_checked():
    assert sorted(p.stem for p in OVERLAY_DIR.glob("*.yaml")) == sorted(JOB_COUNTS)


@pytest.mark.parametrize("name", list(JOB_COUNTS))
def test_overlay_launches_exactly_the_runs_its_result_needs(jobs, name):
    configs = jobs[name]
    assert len(configs) == JOB_COUNTS[name]
    for cfg in configs:
        validate(cfg)
        assert cfg.experiment_name == expected_experiment(name, cfg)
    launched = [(c.env.name, c.optimizer.name, run_leaf(c), c.seed) for c in configs]
    assert len(set(launched)) == len(launched)  # no two jobs share a run directory
    assert set(launched) == EXPECTED[name]


def test_swept_arms_keep_each_envs_paper_settings(jobs):
    for cfg in jobs["heuristics_advantage"] + jobs["main"]:
        if cfg.method.name != "ppo":
            assert cfg.method.p == PAPER_P[cfg.env.name]
    for cfg in jobs["p_ablation"]:
        assert (cfg.method.p is None) == (cfg.method.name == "ppo")
        assert cfg.env.rounds == {"frozenlake": 50, "acrobot": 50, "minigrid": 40, "lunarlander": 150}[cfg.env.name]


@pytest.mark.parametrize("name", list(JOB_COUNTS))
def test_overlay_header_names_its_paper_result_and_command(name):
    header = OVERLAY_DIR.joinpath(f"{name}.yaml").read_text().split("\nexperiment_name")[0]
    assert all(result in header for result in FEEDS[name])
    assert f"rlinfluence -m +experiment={name}" in header
    assert re.search(rf"= {JOB_COUNTS[name]} runs", header)


def writers(jobs, experiment: str) -> list[str]:
    return [overlay for overlay in jobs if EXPERIMENT_NAME.get(overlay, overlay) == experiment]


@pytest.mark.parametrize("output", RUN_OUTPUTS, ids=lambda o: o.name)
def test_every_figure_finds_its_runs_in_an_overlay(jobs, output):
    """The figure code names an experiment per arm and the (env, method tag and protocol, seed) runs it
    reads, as their summaries name them; the overlays writing to that experiment launch them all, and
    the one the figure names is among them."""
    assert output.runs.overlay in writers(jobs, output.runs.experiment)
    for arm in output.runs.arms:
        launched = {
            (c.env.name, method_tag(c.method) + ("" if protocol_tag(c) == "clean" else f"-{protocol_tag(c)}"), c.seed)
            for overlay in writers(jobs, output.runs.experiment_of(arm))
            for c in jobs[overlay]
        }
        needed = {
            (env, arm.tag_for(env) + ("" if protocol == "clean" else f"-{protocol}"), seed)
            for env in output.runs.envs
            for protocol in output.runs.protocols
            for seed in range(output.runs.seeds)
        }
        assert needed <= launched
