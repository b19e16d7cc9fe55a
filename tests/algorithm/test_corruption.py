"""Planted bad data (corruption.py): which records a round plants, how each kind corrupts them, how a run
measures finding them (metrics.planted_detection, corruption.jsonl), and that corruption.fraction=0
changes nothing."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from conftest import compose_config, config_refusal, metrics_rows
from rlinfluence.cli import run_task
from rlinfluence.control.engine import Seed
from rlinfluence.corruption import negate_planted_advantages, planted_records
from rlinfluence.metrics import auroc, planted_detection
from rlinfluence.records import RolloutBuffer
from rlinfluence.round import COLUMNS
from rlinfluence.run.checkpoint import CORRUPTION
from rlinfluence.run.identity import (
    check_identity,
    config_hash,
    digest,
    non_default_settings,
    result_settings,
    write_identity,
)
from rlinfluence.run.loop import Resume, read_resume, train
from rlinfluence.run.rundir import relative_run_dir

CORRUPTED = ("corruption.kind=advantage_sign", "corruption.fraction=0.1")


def planted(seed: int, k: int, n: int, fraction: float) -> torch.Tensor:
    """planted_records of a fraction above 0: a draw, never None."""
    draw = planted_records(seed, k, n, fraction)
    assert draw is not None
    return draw


def corruption_rows(run_dir) -> list[dict]:
    return [json.loads(line) for line in (run_dir / CORRUPTION).read_text().splitlines()]


# ----------------------------------------------------------------------------- which records are planted


@pytest.mark.parametrize("n,fraction", [(64, 0.1), (2048, 0.05), (7, 0.5), (10, 0.999)])
def test_a_round_plants_exactly_round_fraction_n_records(n, fraction):
    assert int(planted(3, 1, n, fraction).sum()) == round(fraction * n)


def test_the_planted_records_are_a_function_of_seed_and_round_alone():
    draw = planted(0, 4, 2048, 0.1)
    assert torch.equal(draw, planted(0, 4, 2048, 0.1))  # a resumed round plants the same records
    assert not torch.equal(draw, planted(0, 5, 2048, 0.1))
    assert not torch.equal(draw, planted(1, 4, 2048, 0.1))
    assert planted_records(0, 4, 2048, 0.0) is None  # a clean run draws nothing


@pytest.mark.parametrize("env", ["frozenlake", "acrobot"])
def test_planting_consumes_no_other_stream(tiny_config, env):
    """The corrupted run collects the clean run's rollout (same observations, actions, rewards) and
    differs from it in the planted records' advantages only."""
    clean, corrupted = (Seed(tiny_config(f"env={env}", *extra)).collect(1) for extra in ((), CORRUPTED))
    marked = corrupted.planted
    assert clean.planted is None and marked is not None and int(marked.sum()) == round(0.1 * len(clean))
    for name in ("obs", "actions", "log_probs", "values", "rewards", "returns", "deltas"):
        assert torch.equal(getattr(clean, name), getattr(corrupted, name)), name
    assert torch.equal(corrupted.advantages[marked], -clean.advantages[marked])
    assert torch.equal(corrupted.advantages[~marked], clean.advantages[~marked])


# ----------------------------------------------------------------------------- the kinds


def hand_made_buffer(advantages: list[float]) -> RolloutBuffer:
    n = len(advantages)
    zeros = torch.zeros(n)
    return RolloutBuffer(
        obs=torch.zeros(n, 2),
        actions=zeros.clone(),
        log_probs=zeros.clone(),
        values=torch.full((n,), 0.5),
        rewards=zeros.clone(),
        dones=zeros.clone(),
        advantages=torch.tensor(advantages),
        returns=torch.tensor(advantages) + 0.5,
        deltas=zeros.clone(),
        env_index=torch.zeros(n, dtype=torch.long),
        step=torch.arange(n),
        planted=torch.tensor([False, True, False, True]),
    )


def test_advantage_sign_negates_the_planted_advantages_and_keeps_the_value_targets():
    buffer = hand_made_buffer([1.0, 2.0, -3.0, -4.0])
    negate_planted_advantages(buffer)
    assert buffer.advantages.tolist() == [1.0, -2.0, -3.0, 4.0]
    assert buffer.returns.tolist() == [1.5, 2.5, -2.5, -3.5]  # Â + V as collected


def test_reward_negates_the_planted_rewards_before_gae(tiny_config):
    """Acrobot's reward is −1 a step, so every planted record's reward changes; its TD error
    δ = r + γV(s') − V(s) then moves by −2r, and the advantages and value targets follow from GAE."""
    clean, corrupted = (
        Seed(tiny_config("env=acrobot", *extra)).collect(1)
        for extra in ((), ("corruption.kind=reward", "corruption.fraction=0.25"))
    )
    marked = corrupted.planted
    assert marked is not None
    assert torch.equal(corrupted.rewards, torch.where(marked, -clean.rewards, clean.rewards))
    torch.testing.assert_close(corrupted.deltas, clean.deltas - 2 * clean.rewards * marked)
    assert not torch.equal(corrupted.advantages[~marked], clean.advantages[~marked])  # GAE spreads it back
    torch.testing.assert_close(corrupted.returns, corrupted.advantages + corrupted.values)
    assert torch.equal(clean.obs, corrupted.obs) and torch.equal(clean.actions, corrupted.actions)


# ----------------------------------------------------------------------------- measuring what was found


def test_precision_recall_and_auroc_against_hand_computed_values():
    planted = np.array([True, True, False, False, False])
    dropped = np.array([True, False, True, False, False])
    influence = np.array([-3.0, -1.0, -2.0, 0.0, 1.0])
    agreement = np.array([-1.0, 1.0, 0.0, 2.0, 3.0])
    detection = planted_detection(planted, dropped, influence, agreement)
    # −influence: planted {3, 1} against clean {2, 0, −1}: 5 of the 6 pairs ordered right.
    # −agreement: planted {1, −1} against clean {0, −2, −3}: 3 + 2 of the 6 pairs.
    assert detection == {
        "n_planted": 2,
        "precision": 0.5,
        "recall": 0.5,
        "auroc_influence": pytest.approx(5 / 6),
        "auroc_advantage": pytest.approx(5 / 6),
    }
    assert auroc(np.array([True, False, False]), np.array([1.0, 1.0, 0.0])) == 0.75  # a tie counts ½
    nothing = planted_detection(planted, np.zeros(5, bool), None, None)
    assert nothing["recall"] == 0 and all(np.isnan(nothing[key]) for key in ("precision", "auroc_influence"))


def test_influence_ranks_flipped_goal_steps_last_on_a_real_frozenlake_buffer(tiny_config):
    """Flip Â of a minority of the goal-reaching records of a real round-1 FrozenLake buffer: influence
    on f_return at θ_k ranks them at the bottom (AUROC near 1).

    Why this must hold: on the non-slippery map every step into the goal is the same (state, action),
    rewarded 1 and terminal, so those records share Â = 1 − V(s) and ∇log π, call it v; they carry the
    round's return signal (the rest of an early buffer's Â is value noise, about half of it negative).
    So ∇f_return ≈ c·(n_goal − 2·n_flipped)·Â·v + noise, which still points along +v while fewer than
    half are flipped, and a record's influence Â_i⟨∇log π_i, ∇f_return⟩ is then ≈ −Â⟨v, ∇f_return⟩ for
    each flipped goal step: the most negative of the buffer. (A random subset of all records would not
    do: flipping a noise record only moves it within a spread that is as often negative as positive.)"""
    trainer = Seed(tiny_config("env=frozenlake", "env.n_steps=2048", "seed=0"))
    buffer = trainer.collect(1)
    goal_steps = np.flatnonzero(buffer.rewards.numpy() == 1)
    assert goal_steps.size >= 5  # the argument needs a few of them
    planted = np.zeros(len(buffer), bool)
    planted[goal_steps[: goal_steps.size // 5]] = True
    buffer.planted = torch.as_tensor(planted)
    negate_planted_advantages(buffer)
    scores = trainer.influence(buffer)
    assert (scores[planted] < 0).all()
    assert planted_detection(planted, ~planted, scores, None)["auroc_influence"] > 0.95


# ----------------------------------------------------------------------------- a corrupted run


def test_a_corrupted_iif_run_logs_what_each_round_planted_and_found(tmp_path):
    cfg = compose_config(
        ["env=frozenlake", *CORRUPTED, "method=iif", "env.rounds=2", "eval.episodes=2"]
        + ["logger=disabled", "progress=false", f"runs_root={tmp_path}"]
    )
    run_task(cfg)
    run_dir = next(tmp_path.rglob(CORRUPTION)).parent
    rows = corruption_rows(run_dir)
    assert [row["round"] for row in rows] == [1, 2]
    metrics = metrics_rows(run_dir)
    assert list(metrics[0]) == COLUMNS  # metrics.csv keeps its columns
    for row, metric in zip(rows, metrics[1:]):
        assert row["n_planted"] == len(row["planted"]) == round(0.1 * 2048)
        dropped = int(metric["n_records"]) - int(metric["n_kept"])
        assert row["precision"] * dropped == pytest.approx(row["recall"] * row["n_planted"])  # both: the caught
        assert 0 <= row["auroc_influence"] <= 1 and 0 <= row["auroc_advantage"] <= 1


def test_a_corrupted_ppo_run_scores_influence_to_measure_it_and_a_clean_one_does_not(tmp_path, tiny_config):
    run_task(tiny_config("method=ppo", *CORRUPTED), tmp_path / "corrupted")
    run_task(tiny_config("method=ppo"), tmp_path / "clean")
    assert all(row["auroc_influence"] is not None for row in corruption_rows(tmp_path / "corrupted"))
    assert metrics_rows(tmp_path / "clean")[1]["n_negative"] == "nan"
    assert not (tmp_path / "clean" / CORRUPTION).exists()


def test_a_resumed_corrupted_run_plants_the_same_records_and_logs_each_round_once(tmp_path, tiny_config):
    cfg = tiny_config("env=frozenlake", "method=iif", "env.rounds=3", *CORRUPTED)
    whole, interrupted = tmp_path / "whole", tmp_path / "interrupted"
    for run_dir in (whole, interrupted):
        run_dir.mkdir()
    train(cfg, whole, Resume())
    train(cfg, interrupted, Resume(), last_round=2)
    # Killed after round 3's lines were written, before its checkpoint: the resumed run redoes round 3.
    stale = corruption_rows(interrupted)[-1] | {"round": 3, "planted": []}
    with open(interrupted / CORRUPTION, "a") as handle:
        handle.write(json.dumps(stale) + "\n")
    train(cfg, interrupted, read_resume(interrupted))
    assert corruption_rows(interrupted) == corruption_rows(whole)
    assert metrics_rows(interrupted, timings=False) == metrics_rows(whole, timings=False)


# ----------------------------------------------------------------------------- the config


@pytest.mark.parametrize(
    "overrides,message",
    [
        (["corruption.fraction=1"], "corruption.fraction=1.0 must be in [0, 1)"),
        (["corruption.fraction=-0.1"], "corruption.fraction=-0.1 must be in [0, 1)"),
        (["corruption.kind=labels"], "corruption.kind='labels' is not one of: advantage_sign, reward"),
        (
            ["env=toxicity_tiny", "model=tiny", "corruption.fraction=0.1"],
            "corruption.kind='advantage_sign' is not one of: reward",
        ),
    ],
)
def test_bad_corruption_settings_are_refused_in_one_line_naming_the_key(overrides, message):
    assert message in config_refusal(*overrides)


@pytest.mark.parametrize("preset", [["env=frozenlake", "method=iif"], ["env=lunarlander", "method=ppo"]])
def test_no_corruption_keeps_every_run_dir_and_identity(tmp_path, preset):
    """corruption.* at its defaults is no setting at all: the same run dir and config hash as before the
    key existed, and a run dir made before it is continued."""
    cfg, explicit = compose_config(preset), compose_config([*preset, "corruption.fraction=0.0"])
    assert relative_run_dir(cfg) == relative_run_dir(explicit) and config_hash(cfg) is None is config_hash(explicit)
    assert str(relative_run_dir(cfg)) in ("frozenlake/sgd/iif-p50/seed0", "lunarlander/sgd/ppo/seed0")
    write_identity(tmp_path, cfg)
    (tmp_path / "metrics.csv").touch()
    identity = json.loads((tmp_path / "identity.json").read_text())
    identity["settings"] = {k: v for k, v in result_settings(cfg).items() if not k.startswith("corruption.")}
    (tmp_path / "identity.json").write_text(json.dumps(identity))
    check_identity(tmp_path, cfg)  # the run predates the key: taken at its default
    # A fraction above 0 is a setting: the clean run's leaf with the hash of that one setting.
    planted = compose_config([*preset, "corruption.fraction=0.1"])
    assert non_default_settings(planted) == {"corruption.fraction": 0.1}
    leaf = f"{relative_run_dir(cfg).parent.name}-{digest({'corruption.fraction': 0.1})}"
    assert relative_run_dir(planted) == relative_run_dir(cfg).parent.with_name(leaf) / "seed0"
