"""task=timeline (paper §4.2, Fig. 4, 10): the graph roughness on cases whose value is known by hand,
its nearest-neighbour graph against brute force, the phase cut on planted change points, and the task
end to end on a tiny Acrobot run, down to the figure drawn from its CSV."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
import torch

from conftest import analysis_output
from rlinfluence.analyses.timeline import graph_roughness, knn_edges, phase_starts
from rlinfluence.choices import ConfigError
from rlinfluence.cli import run_task
from rlinfluence.config.paths import REPO_ROOT
from rlinfluence.control.networks import ActorCritic
from rlinfluence.control.trainer import Trainer
from rlinfluence.figures import regenerate, timeline
from rlinfluence.figures.catalogue import OUTPUTS
from rlinfluence.run.checkpoint import load_snapshot


def test_roughness_of_a_path_graph_matches_the_formula_by_hand():
    # Points 0, 1, 3, 6 on a line, u = 1: edges 0–1, 1–3, 3–6 of lengths 1, 2, 3, so σ = 2.
    points = np.array([[0.0], [1.0], [3.0], [6.0]])
    influence = np.array([2.0, 2.0, 1.0, 1.0])  # Ĩ = 1, 1, 0.5, 0.5: only the edge 1–3 differs
    weights = np.exp(-(np.array([1.0, 2.0, 3.0]) ** 2) / 2.0**2)
    expected = weights[1] * 0.5**2 / weights.sum()
    assert graph_roughness(points, influence, neighbours=1) == pytest.approx(expected, rel=1e-12)
    # Negative-influence records are not on the graph, wherever they lie.
    with_negative = graph_roughness(np.vstack([points, [[0.5], [2.0]]]), np.append(influence, [-5.0, -1.0]), 1)
    assert with_negative == pytest.approx(expected, rel=1e-12)


def test_roughness_is_zero_for_influence_constant_on_each_of_two_far_clusters():
    rng = np.random.default_rng(0)
    points = np.vstack([rng.normal(0, 1, (30, 3)), rng.normal(100, 1, (30, 3))])
    constant = np.full(60, 0.3)
    per_cluster = np.repeat([2.0, 1.0], 30)
    assert graph_roughness(points, constant, neighbours=5) == 0.0
    assert graph_roughness(points, per_cluster, neighbours=5) == 0.0  # no edge crosses between clusters
    scattered = rng.permutation(per_cluster)
    rough = graph_roughness(points, scattered, neighbours=5)
    assert rough > 0.05
    assert graph_roughness(points, 7 * scattered, neighbours=5) == pytest.approx(rough)  # Ĩ = I / max I
    assert math.isnan(graph_roughness(points, -per_cluster, neighbours=5))  # no positive record


def test_knn_graph_matches_brute_force():
    rng = np.random.default_rng(1)
    points = rng.normal(size=(40, 3))
    u = 4
    distance = np.linalg.norm(points[:, None] - points[None], axis=-1)
    expected = {}
    for i in range(len(points)):
        for j in np.argsort(distance[i])[1 : u + 1]:
            expected[(min(i, j), max(i, j))] = distance[i, j]
    heads, tails, lengths = knn_edges(points, u)
    assert dict(zip(zip(heads.tolist(), tails.tolist()), lengths)) == pytest.approx(expected)
    assert len(heads) == len(expected)


def test_phase_cut_finds_planted_change_points():
    rng = np.random.default_rng(2)
    pi = np.concatenate([np.full(10, 0.3), np.full(15, 0.6), np.full(12, 0.95)]) + rng.normal(0, 0.02, 37)
    roughness = np.concatenate([np.full(10, 0.02), np.full(15, 0.08), np.full(12, 0.03)]) + rng.normal(0, 0.004, 37)
    assert phase_starts(np.column_stack([pi, roughness]), 3) == [0, 10, 25]
    assert phase_starts(np.column_stack([pi, roughness]), 1) == [0]
    assert phase_starts(np.column_stack([pi[:5], roughness[:5]]), 3) == [0]  # 5 rounds hold one phase of 3


TIMELINE = [
    "env=acrobot",
    "task=timeline",
    "env.n_steps=128",
    "ppo.batch_size=64",
    "env.rounds=6",
    "eval.episodes=2",
    "analysis.timeline.top=5",
    "analysis.timeline.neighbours=5",
    "analysis.timeline.phases=2",
]


def test_timeline_on_a_tiny_acrobot_run_writes_its_csv_beside_its_run_and_draws(tmp_path, tiny_config):
    cfg = tiny_config(*TIMELINE, f"runs_root={tmp_path / 'runs'}", f"figures.data_dir={tmp_path / 'data'}")
    rows = run_task(cfg)
    path, identity = analysis_output(tmp_path / "runs", "timeline")
    written = pd.read_csv(path)
    assert identity["non_default"]["env.rounds"] == 6 and identity["env"] == "acrobot" and identity["seed"] == 0
    assert {
        "env",
        "seed",
        "round",
        "pi_target",
        "roughness",
        "n_positive",
        "n_records",
        "target_state",
        "target_action",
        "rank",
        "record",
        "influence",
        "action",
        "advantage_gae",
        "embedding_distance",
        *(f"obs_{d}" for d in range(6)),
    } == set(written.columns)
    assert len(written) == 6 * 5 and sorted(written["round"].unique()) == list(range(1, 7))
    for _, records in written.groupby("round"):
        assert list(records["rank"]) == [1, 2, 3, 4, 5] and records["influence"].is_monotonic_decreasing
        assert records[["pi_target", "roughness", "n_positive"]].nunique().max() == 1  # one value per round
    assert written["pi_target"].between(0, 1).all() and (written["n_positive"] <= 128).all()

    # The default target: s* the start state of the run's seed, a* the final policy's most probable action there.
    state = json.loads(written["target_state"].iloc[0])
    run_dir = next((tmp_path / "runs").rglob("snapshots")).parent
    trainer = Trainer(cfg)
    final = ActorCritic(trainer.envs.observation_space, trainer.envs.action_space, cfg.env.network, torch.Generator())
    trainer.close()
    final.load_state_dict(load_snapshot(run_dir, 6)["model"])
    s_star = torch.tensor([state], dtype=torch.float32)
    assert (written["target_action"] == int(final.policy_output(s_star).argmax())).all()
    # π(a*|s*) of round 1 is the initial policy's.
    initial = ActorCritic(trainer.envs.observation_space, trainer.envs.action_space, cfg.env.network, torch.Generator())
    initial.load_state_dict(load_snapshot(run_dir, 0)["model"])
    with torch.no_grad():
        pi_1 = torch.softmax(initial.policy_output(s_star), -1)[0, int(written["target_action"].iloc[0])]
    assert written.loc[written["round"] == 1, "pi_target"].iloc[0] == pytest.approx(float(pi_1), rel=1e-6)
    assert len(rows) == len(written)

    # The refresh gathers it into the data dir; Fig. 10 documents another command, so it is not drawn from it ...
    results = {
        name: (status, reason)
        for name, status, reason in regenerate(tmp_path / "data", tmp_path / "figures", runs_root=tmp_path / "runs")
    }
    assert (tmp_path / "data" / "analyses" / "timeline" / "acrobot-seed0.csv").read_bytes() == path.read_bytes()
    status, reason = results["fig10_timeline_acrobot"]
    assert (
        status == "missing"
        and ("acrobot-seed0.csv: analysis.timeline.neighbours=5, this has analysis.timeline.neighbours=20") in reason
    )
    assert "task=timeline env=highway" in (tmp_path / "figures" / "MISSING.md").read_text()
    # ... though its figure draws from the rows as they are.
    fig10 = next(output for output in OUTPUTS if output.name == "fig10_timeline_acrobot")
    timeline.timeline_figure(fig10, written).savefig(tmp_path / "fig10.png")
    assert (tmp_path / "fig10.png").stat().st_size > 10_000


def test_timeline_refuses_a_target_that_does_not_fit_the_env(tmp_path, tiny_config):
    with pytest.raises(ConfigError, match=r"analysis.timeline.action=\[3\] must be one action index in 0..2"):
        run_task(tiny_config(*TIMELINE, "analysis.timeline.action=3", f"runs_root={tmp_path}"))
    with pytest.raises(ConfigError, match="analysis.timeline.state has 2 entries, env=acrobot observes 6"):
        run_task(tiny_config(*TIMELINE, "analysis.timeline.state=[0,1]", f"runs_root={tmp_path}"))
    with pytest.raises(ConfigError, match="analysis.timeline.neighbours=0 must be >= 1"):
        run_task(tiny_config(*TIMELINE, "analysis.timeline.neighbours=0", f"runs_root={tmp_path}"))
    assert not any(tmp_path.iterdir())  # refused before training anything


def test_timeline_without_a_default_state_follows_the_start_state(tmp_path, tiny_config):
    # FrozenLake's preset sets no analysis.timeline.state: s* is its start cell. Its one-hot states give many
    # records the same embedding (edges of length 0), which the roughness must take in its stride.
    cfg = tiny_config(
        "env=frozenlake",
        "task=timeline",
        "env.rounds=3",
        "analysis.timeline.top=3",
        f"runs_root={tmp_path / 'runs'}",
        f"figures.data_dir={tmp_path / 'data'}",
    )
    rows = run_task(cfg)
    assert json.loads(rows["target_state"].iloc[0]) == [1.0] + [0.0] * 15
    assert rows["roughness"].dropna().between(0, 1).all() and len(rows) == 3 * 3


def test_timeline_figure_legend_names_every_action_any_phase_shows():
    # The committed Highway timeline: phase 1's top records take 2 actions, later phases more.
    rows = pd.read_csv(REPO_ROOT / "paper_figures" / "data" / "analyses" / "timeline" / "highway-seed0.csv")
    output = next(output for output in OUTPUTS if output.name == "fig4_timeline_highway")
    fig = timeline.timeline_figure(output, rows)
    (legend,) = fig.legends
    shown = sorted(rows[rows["seed"] == rows["seed"].min()]["action"].unique())
    assert [text.get_text() for text in legend.get_texts()] == [f"a = {action}" for action in shown] + ["s*"]
    assert len(shown) > rows[rows["round"] <= 4]["action"].nunique()  # more than phase 1 alone took
