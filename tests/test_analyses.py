"""Section 4's analyses on tiny budgets: the Monte-Carlo true advantage against dynamic programming, the
intervention's all-records arm against the run it replays, the task registry and the figures."""

from __future__ import annotations

import filecmp

import numpy as np
import pandas as pd
import pytest
import torch

from rlinfluence.analyses.diagnose import true_advantages
from rlinfluence.cli import run_task
from rlinfluence.config import ConfigError
from rlinfluence.envs import make_env
from rlinfluence.figures import regenerate
from rlinfluence.figures.section4 import OUTPUTS as SECTION4
from rlinfluence.round import Trainer
from conftest import write_analyses

ANALYSIS = ["logger=disabled", "progress=false", "env=frozenlake", "env.n_steps=64", "ppo.batch_size=32",
            "env.rounds=3", "eval.episodes=4", "eval.n_parallel=2"]


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
    values = np.linalg.solve(np.eye(n_states) - gamma * np.einsum("sa,sat->st", probs, moves),
                             (probs * reward).sum(1))
    q = reward + gamma * moves @ values
    return q - values[:, None]


def test_monte_carlo_true_advantage_converges_to_the_exact_one(tiny_config):
    cfg = tiny_config("env=frozenlake", "env.n_steps=128")
    trainer = Trainer(cfg)
    buffer = trainer.collect()
    advantage, advantage_se = true_advantages(trainer.model, cfg.env, buffer, rollouts=400, gamma=cfg.ppo.gamma,
                                              seed_seq=np.random.SeedSequence(0))
    env = make_env(cfg.env)
    exact = exact_advantages(trainer.model, env, cfg.ppo.gamma)[buffer.state_keys.numpy(),
                                                                 buffer.actions.numpy().astype(int)]
    trainer.close()
    assert np.abs(exact).max() > 0.01  # the oracle is not trivially zero on the visited states
    # Within 4.5 SE (plus 0.01 for the 100-step time limit the exact solution ignores).
    assert np.all(np.abs(advantage - exact) <= 4.5 * advantage_se + 0.01)


def test_intervention_all_records_arm_reproduces_the_run(tmp_path, tiny_config):
    cfg = tiny_config(*ANALYSIS[2:], "task=intervene", f"runs_root={tmp_path / 'runs'}",
                      f"figures.data_dir={tmp_path / 'data'}")
    table = run_task(cfg)
    assert (table["matches_run"].dropna() == True).all() and len(table) == 3 * 3  # noqa: E712
    run = pd.read_csv(next((tmp_path / "runs").rglob("metrics.csv"))).set_index("round")
    everything = table[table["arm"] == "all"].set_index("round")
    assert np.array_equal(everything["test_return"], run.loc[everything.index, "test_return"])
    dropped = table.pivot(index="round", columns="arm", values="n_dropped")
    assert (dropped["influence"] == table[table["arm"] == "all"].set_index("round")["n_negative"]).all()
    assert (dropped["random"] == dropped["influence"]).all() and (dropped["all"] == 0).all()
    assert (tmp_path / "data" / "analyses" / "intervene" / "frozenlake-seed0.csv").exists()


def test_diagnose_writes_one_row_per_record_and_round(tmp_path, tiny_config):
    cfg = tiny_config(*ANALYSIS[2:], "task=diagnose", "analysis.diagnose.rounds=[1,3]",
                      "analysis.diagnose.rollouts=5", f"runs_root={tmp_path / 'runs'}",
                      f"figures.data_dir={tmp_path / 'data'}")
    table = run_task(cfg)
    assert len(table) == 2 * 64 and set(table["round"]) == {1, 3}
    assert sorted(table[table["round"] == 1]["rank"]) == list(range(1, 65))


def test_diagnose_refuses_an_env_without_a_settable_state(tmp_path, tiny_config):
    with pytest.raises(ConfigError, match="env=acrobot cannot be put into .*envs that can: frozenlake, minigrid"):
        run_task(tiny_config("env=acrobot", "task=diagnose", f"runs_root={tmp_path}"))
    assert not any(tmp_path.iterdir())


def test_an_unknown_task_is_refused_naming_the_registered_ones(tiny_config):
    with pytest.raises(ConfigError, match="task='nope' is not one of: train, diagnose, figures, intervene"):
        run_task(tiny_config("task=nope"))


def test_section4_outputs_are_drawn_from_the_analyses_csvs_reproducibly(tmp_path):
    write_analyses(tmp_path / "data")
    for name in ("diagnose/minigrid-seed1.csv", "intervene/minigrid-seed0.csv"):
        (tmp_path / "data" / "analyses" / name).unlink()
    first = {name: status for name, status, _ in regenerate(tmp_path / "data", tmp_path / "a")}
    regenerate(tmp_path / "data", tmp_path / "b")
    drawn = [o.name for o in SECTION4 if first[o.name] != "missing"]
    assert {"fig3a_bottom_records", "fig8_bottom_records_rounds", "fig3d_advantage_product_frozenlake",
            "fig5_intervention", "fig11_intervention_random", "intervention_summary"} <= set(drawn)
    assert first["fig3c_advantage_error_minigrid"] == first["fig3b_bottom_views_minigrid"] == "missing"
    assert first["fig11_intervention_random"] == "partial"
    files = [p.name for p in (tmp_path / "a").iterdir()]
    assert not filecmp.cmpfiles(tmp_path / "a", tmp_path / "b", files, shallow=False)[1]
    assert "task=diagnose env=minigrid" in (tmp_path / "a" / "MISSING.md").read_text()
