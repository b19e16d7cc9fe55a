"""Section 4's analyses on tiny budgets: the Monte-Carlo true advantage against dynamic programming, the
intervention's all-records arm against the run it replays, the task registry and the figures; and the
counterfactual check (removing records in place, its first-order predictions, its correlations)."""

from __future__ import annotations

import filecmp
import re
import time

import numpy as np
import pandas as pd
import pytest
import torch

from conftest import analysis_output, write_analyses
from rlinfluence.analyses.counterfactual import predicted_changes
from rlinfluence.analyses.diagnose import true_advantages
from rlinfluence.analyses.standard_run import standard_run_config
from rlinfluence.choices import ConfigError
from rlinfluence.cli import run_task
from rlinfluence.control.engine import Seed
from rlinfluence.envs.make import make_env
from rlinfluence.figures import regenerate
from rlinfluence.figures.analysis_data import AnalysisData
from rlinfluence.figures.arms import iif_p
from rlinfluence.figures.counterfactual import removal_correlations
from rlinfluence.figures.requirements import FigureData
from rlinfluence.figures.section4 import OUTPUTS as SECTION4
from rlinfluence.run.rundir import run_dir
from rlinfluence.run.tasks import task_names
from rlinfluence.selection import Selection
from rlinfluence.update import minibatch_ids

ANALYSIS = ["env=frozenlake", "env.rounds=3", "eval.episodes=4"]  # with tiny_config's debug=smoke


def exact_advantages(model, env, gamma: float) -> np.ndarray:
    """A^π(s, a) of the model's policy on FrozenLake's transition table, by solving the Bellman equation."""
    table = env.unwrapped.P
    n_states, n_actions = len(table), len(table[0])
    with torch.no_grad():
        probs = torch.softmax(model.policy_output(torch.eye(n_states)), -1).numpy()
    reward, moves = np.zeros((n_states, n_actions)), np.zeros((n_states, n_actions, n_states))
    for s in range(n_states):
        for a in range(n_actions):
            for p, s_next, r, terminated in table[s][a]:
                reward[s, a] += p * r
                moves[s, a, s_next] += p * (not terminated)
    values = np.linalg.solve(np.eye(n_states) - gamma * np.einsum("sa,sat->st", probs, moves), (probs * reward).sum(1))
    q = reward + gamma * moves @ values
    return q - values[:, None]


def test_monte_carlo_true_advantage_converges_to_the_exact_one(tiny_config):
    cfg = tiny_config("env=frozenlake", "env.n_steps=128")
    trainer = Seed(cfg)
    buffer = trainer.collect(1)
    advantage, advantage_se = true_advantages(
        trainer.model, cfg.env, buffer, rollouts=400, gamma=cfg.ppo.gamma, seed_seq=np.random.SeedSequence(0)
    )
    env = make_env(cfg.env)
    assert buffer.state_keys is not None  # FrozenLake's
    exact = exact_advantages(trainer.model, env, cfg.ppo.gamma)[
        buffer.state_keys.numpy(), buffer.actions.numpy().astype(int)
    ]
    trainer.close()
    assert np.abs(exact).max() > 0.01  # the oracle is not trivially zero on the visited states
    # Within 4.5 SE (plus 0.01 for the 100-step time limit the exact solution ignores).
    assert np.all(np.abs(advantage - exact) <= 4.5 * advantage_se + 0.01)


def test_intervention_all_records_arm_reproduces_the_run(tmp_path, tiny_config):
    cfg = tiny_config(
        *ANALYSIS, "task=intervene", f"runs_root={tmp_path / 'runs'}", f"figures.data_dir={tmp_path / 'data'}"
    )
    table = run_task(cfg)
    assert (table["matches_run"].dropna() == True).all() and len(table) == 3 * 3  # noqa: E712
    run = pd.read_csv(next((tmp_path / "runs").rglob("metrics.csv"))).set_index("round")
    everything = table[table["arm"] == "all"].set_index("round")
    assert np.array_equal(everything["test_return"], run.loc[everything.index, "test_return"])
    dropped = table.pivot(index="round", columns="arm", values="n_dropped")
    assert (dropped["influence"] == table[table["arm"] == "all"].set_index("round")["n_negative"]).all()
    assert (dropped["random"] == dropped["influence"]).all() and (dropped["all"] == 0).all()
    path, identity = analysis_output(tmp_path / "runs", "intervene")
    assert path.parent.parent == run_dir(standard_run_config(cfg))
    assert path.name == f"intervene-{identity['config_hash']}.csv"
    written = pd.read_csv(path)
    assert list(written.columns) == list(table.columns) and len(written) == len(table)
    assert not (tmp_path / "data").exists()  # nothing in figures.data_dir: the refresh gathers it from the run


def test_intervention_at_iif_p_drops_that_share_of_the_negatives_into_its_own_file(tmp_path, tiny_config):
    cfg = tiny_config(
        *ANALYSIS,
        "task=intervene",
        "analysis.intervene.p=50",
        "analysis.intervene.rounds=[2,3]",
        f"runs_root={tmp_path / 'runs'}",
        f"figures.data_dir={tmp_path / 'data'}",
    )
    table = run_task(cfg)
    assert (table["matches_run"].dropna() == True).all() and (table["p"] == 50).all()  # noqa: E712
    dropped = table.pivot(index="round", columns="arm", values="n_dropped")
    negative = table[table["arm"] == "all"].set_index("round")["n_negative"]
    assert (negative > 1).all() and (dropped["influence"] == negative // 2).all()
    assert (dropped["random"] == dropped["influence"]).all()
    path, identity = analysis_output(tmp_path / "runs", "intervene")
    assert identity["variant"] == "-p50" and identity["non_default"]["analysis.intervene.p"] == 50
    # the paper's all-negatives rows are intervene-<hash>
    assert path.name == f"intervene-p50-{identity['config_hash']}.csv"


def test_an_intervention_p_out_of_range_is_refused_before_anything_is_written(tmp_path, tiny_config):
    with pytest.raises(ConfigError, match=r"analysis.intervene.p=0.0 must be in \(0, 100\]"):
        run_task(
            tiny_config(
                "task=intervene",
                "analysis.intervene.p=0",
                f"runs_root={tmp_path / 'runs'}",
                f"figures.data_dir={tmp_path / 'data'}",
            )
        )
    assert not any(tmp_path.iterdir())


def test_outputs_read_the_intervention_rows_of_their_own_p_only(tmp_path):
    write_analyses(tmp_path / "data")  # <env>-seed<k>.csv without a p column, <env>-seed<k>-p<p>.csv with one
    outputs = {o.name: o for o in SECTION4}
    data = FigureData(pd.DataFrame(), tmp_path / "data")
    paper_rows = outputs["intervention_summary"].runs.select(data)
    at_p = outputs["intervention_at_iif_p"].runs.select(data)
    assert len(paper_rows) == len(at_p) == 4 * 3 * 5 * 3
    assert "p" not in paper_rows and (at_p["p"] == at_p["env"].map(iif_p)).all()
    at_p_table = outputs["intervention_at_iif_p"].build(outputs["intervention_at_iif_p"], at_p)
    paper_table = outputs["intervention_summary"].build(outputs["intervention_summary"], paper_rows)
    assert isinstance(at_p_table, pd.DataFrame) and isinstance(paper_table, pd.DataFrame)  # tables, not figures
    assert {"drop 12.5 % of negative influence (IIF's p)", "drop 50 % of negative influence (IIF's p)"} <= set(
        at_p_table["arm"]
    )
    assert "drop all negative influence" in set(paper_table["arm"])


def test_diagnose_writes_one_row_per_record_and_round(tmp_path, tiny_config):
    cfg = tiny_config(
        *ANALYSIS,
        "task=diagnose",
        "analysis.diagnose.rounds=[1,3]",
        "analysis.diagnose.rollouts=5",
        f"runs_root={tmp_path / 'runs'}",
        f"figures.data_dir={tmp_path / 'data'}",
    )
    table = run_task(cfg)
    assert len(table) == 2 * 64 and set(table["round"]) == {1, 3}
    assert sorted(table[table["round"] == 1]["rank"]) == list(range(1, 65))


def test_diagnose_refuses_an_env_without_a_settable_state(tmp_path, tiny_config):
    with pytest.raises(ConfigError, match="env=acrobot cannot be put into .*envs that can: frozenlake, minigrid"):
        run_task(tiny_config("env=acrobot", "task=diagnose", f"runs_root={tmp_path}"))
    assert not any(tmp_path.iterdir())


def smoke_task_args(task: str, tmp_path) -> list[str]:
    """What a task needs beside debug=smoke: for figures, an experiment's own runs (the paper's ~65 outputs
    take minutes whatever the preset; they log a line each as they are made); a committed run to replay; the
    analyses' rows (their standard run's) away from the repo's data."""
    if task == "figures":
        return [f"figures.runs_root={tmp_path / 'runs'}", "figures.experiment=default"]
    if task == "replay":
        return ["replay.run=main/frozenlake/sgd/iif-p50/seed0"]
    return [f"figures.data_dir={tmp_path / 'data'}"]


@pytest.mark.parametrize("task", task_names())
def test_debug_smoke_makes_every_task_a_run_of_seconds_with_its_progress_shown(task, tmp_path, tiny_config, capsys):
    runs = f"runs_root={tmp_path / 'runs'}"
    if task == "figures":
        run_task(tiny_config(runs))  # the experiment's runs to draw
    started = time.perf_counter()
    run_task(tiny_config(f"task={task}", runs, "progress=true", *smoke_task_args(task, tmp_path)))
    assert time.perf_counter() - started < 60  # seconds here; minutes on a loaded machine would still pass
    shown = capsys.readouterr().err
    # A bar, down to a replay's re-trained rounds and each removal group a counterfactual retrains
    if task != "figures":
        assert re.search(r"\| *\d+/\d+ \[", shown), shown  # tqdm's "| n/total [elapsed"
    if task == "counterfactual":
        assert "round 2 removal groups: 100%|" in shown


def test_an_unknown_task_is_refused_naming_the_registered_ones(tiny_config):
    registered = "train, bottom_frames, counterfactual, diagnose, figures, intervene"
    with pytest.raises(ConfigError, match=f"task=.nope. is not one of: {registered}"):
        run_task(tiny_config("task=nope"))


def test_section4_outputs_are_drawn_from_the_analyses_csvs_reproducibly(tmp_path):
    write_analyses(tmp_path / "data")
    for name in ("diagnose/minigrid-seed1.csv", "intervene/minigrid-seed0.csv"):
        (tmp_path / "data" / "analyses" / name).unlink()
    first = {name: status for name, status, _ in regenerate(tmp_path / "data", tmp_path / "a")}
    regenerate(tmp_path / "data", tmp_path / "b")
    drawn = [o.name for o in SECTION4 if first[o.name] != "missing"]
    assert {
        "fig3a_bottom_records",
        "fig8_bottom_records_rounds",
        "fig3d_advantage_product_frozenlake",
        "fig5_intervention",
        "fig11_intervention_random",
        "intervention_summary",
    } <= set(drawn)
    assert first["fig3c_advantage_error_minigrid"] == first["fig3b_bottom_views_minigrid"] == "missing"
    assert first["fig11_intervention_random"] == "partial"
    files = [p.name for p in (tmp_path / "a").iterdir()]
    assert not filecmp.cmpfiles(tmp_path / "a", tmp_path / "b", files, shallow=False)[1]
    assert "task=diagnose env=minigrid" in (tmp_path / "a" / "MISSING.md").read_text()


def test_an_analysis_command_has_one_line_per_distinct_overrides():
    data = AnalysisData(
        "intervene",
        ("frozenlake", "acrobot", "minigrid"),
        2,
        env_overrides=(("acrobot", "eval.episodes=100"), ("minigrid", "eval.episodes=100")),
    )
    assert data.command == (
        "rlinfluence -m task=intervene env=frozenlake seed=0,1 && "
        "rlinfluence -m task=intervene env=acrobot,minigrid seed=0,1 eval.episodes=100"
    )
    assert AnalysisData("diagnose", ("frozenlake",), 1, overrides="x=1").command == (
        "rlinfluence -m task=diagnose env=frozenlake seed=0 x=1"
    )


def test_in_place_removal_keeps_the_standard_minibatches_without_the_dropped_records():
    keep = np.ones(100, bool)
    keep[[3, 50, 51, 97]] = False
    standard = [b.numpy() for b in minibatch_ids(Selection(np.ones(100, bool)), 32, np.random.default_rng(7))]
    removed = [b.numpy() for b in minibatch_ids(Selection(keep, in_place=True), 32, np.random.default_rng(7))]
    assert [list(b[keep[b]]) for b in standard] == [list(b) for b in removed]
    everything = minibatch_ids(Selection(np.ones(100, bool), in_place=True), 32, np.random.default_rng(7))
    assert all(np.array_equal(a, b.numpy()) for a, b in zip(standard, everything, strict=True))


def test_first_order_predictions_of_a_removal_by_hand():
    scores, plan, lr = np.array([1.0, 2.0, 3.0, 4.0]), [np.array([0, 1]), np.array([2, 3])], 0.1
    # Record 0 leaves its minibatch: plain −η·I_0/|B|; centred −η·(I_0 − mean_B I)/|K| (record 1 now weighs 1).
    assert np.allclose(predicted_changes(scores, np.array([True, False, False, False]), plan, lr), (-0.05, 0.05))
    # A minibatch that loses every record loses its whole step, −η·mean_B I, under both.
    assert np.allclose(predicted_changes(scores, np.array([False, False, True, True]), plan, lr), (-0.35, -0.35))


def test_counterfactual_empty_group_reproduces_the_run_bit_for_bit(tmp_path, tiny_config):
    cfg = tiny_config(
        *ANALYSIS,
        "task=counterfactual",
        "analysis.counterfactual.rounds=[2]",
        "analysis.counterfactual.sizes=[0.05,0.5]",
        "analysis.counterfactual.groups=3",
        "analysis.counterfactual.eval_episodes=4",
        f"runs_root={tmp_path / 'runs'}",
        f"figures.data_dir={tmp_path / 'data'}",
    )
    table = run_task(cfg)
    empty = table[table["kind"] == "none"].iloc[0]
    assert empty["matches_run"] == True and empty["actual"] == 0 and empty["test_change"] == 0  # noqa: E712
    random = table[table["kind"] == "random"]
    assert sorted(random["n_removed"]) == [3] * 3 + [32] * 3 and (random["actual"] != 0).all()
    n_negative = table.loc[table["kind"] == "all_negative", "n_removed"].iloc[0]
    assert table.loc[table["kind"] == "iif", "n_removed"].iloc[0] == int(np.floor(n_negative * cfg.env.p / 100))
    # Dropping negative-influence records is predicted to raise f_return.
    assert table.loc[table["kind"].isin(["iif", "all_negative"]), "predicted_plain"].gt(0).all()
    path, identity = analysis_output(tmp_path / "runs", "counterfactual")
    assert identity["non_default"]["analysis.counterfactual.groups"] == 3 and not (tmp_path / "data").exists()


def test_counterfactual_refuses_a_group_size_outside_the_buffer(tmp_path, tiny_config):
    with pytest.raises(ConfigError, match=r"analysis.counterfactual.sizes=\[0.5, 1.5\] must be fractions"):
        run_task(
            tiny_config(
                "task=counterfactual",
                "analysis.counterfactual.rounds=[1]",
                "analysis.counterfactual.sizes=[0.5,1.5]",
                f"runs_root={tmp_path}",
            )
        )
    assert not any(tmp_path.iterdir())


def test_removal_correlations_on_a_constructed_case():
    predicted = np.linspace(-1.0, 1.0, 20)
    rows = pd.DataFrame(
        [
            {
                "env": "acrobot",
                "seed": 0,
                "round": 5,
                "kind": "random",
                "size": 0.01,
                "predicted_centred": x,
                "predicted_plain": x,
                "actual": 2 * x,
                "test_change": -x,
            }
            for x in predicted
        ]
        + [
            {
                "env": "acrobot",
                "seed": 0,
                "round": 5,
                "kind": "random",
                "size": 0.5,
                "predicted_centred": x,
                "predicted_plain": x**3,
                "actual": x**3,
                "test_change": np.nan,
            }
            for x in predicted
        ]
        + [
            {
                "env": "acrobot",
                "seed": 0,
                "round": 5,
                "kind": "iif",
                "size": 0.2,
                "predicted_centred": 1.0,
                "predicted_plain": 0.5,
                "actual": 2.0,
                "test_change": 0.0,
            }
        ]
    )
    table = removal_correlations(rows).set_index("Group")
    small, large, iif = table.loc["random 1%"], table.loc["random 50%"], table.loc["IIF drop set"]
    assert small[
        ["Points", "Pearson (centred)", "Spearman (centred)", "Scale (centred)", "Pearson test Δ (centred)"]
    ].tolist() == ["20", "1.00", "1.00", "2.00", "-1.00"]
    # actual = predicted³: ranked perfectly, not linear in the centred prediction; exact in the plain one.
    assert large["Spearman (centred)"] == "1.00" and float(large["Pearson (centred)"]) < 0.95
    assert large[["Pearson (plain)", "Scale (plain)", "Pearson test Δ (centred)"]].tolist() == ["1.00", "1.00", "—"]
    assert iif[["Points", "Pearson (centred)", "Scale (centred)", "Scale (plain)"]].tolist() == [
        "1",
        "—",
        "2.00",
        "4.00",
    ]
