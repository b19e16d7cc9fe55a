"""Robust IIF: the entropy guard (method=iif_guard) and the held-out drop count (method.p=auto)."""

from __future__ import annotations

import json
from dataclasses import fields
from typing import Any

import numpy as np
import pytest
import torch

from conftest import compose_config, config_refusal, metrics_rows, one_network_rollout
from rlinfluence.cli import run_task
from rlinfluence.config.schema import PPOConfig
from rlinfluence.control.trainer import Trainer
from rlinfluence.influence import _Attribution, influence_scores, reference_scores
from rlinfluence.records import RolloutBuffer
from rlinfluence.run.rundir import relative_run_dir
from rlinfluence.selection import (
    DropMostNegative,
    DropMostNegativeEntropyGuarded,
    best_drop_count,
    held_out_scores,
    n_to_drop,
    within_entropy_budget,
)
from rlinfluence.share import FilterShare
from rlinfluence.targets import EntropyTarget, ReturnTarget
from rlinfluence.validation import validate

# The robust variants as the overlays sweep them (conf/method/), with their run-directory tags on FrozenLake.
ROBUST = {
    "iif_guard-p50": ["method=iif_guard"],
    "iif-pauto": ["method=iif_auto"],
    "iif_guard-pauto": ["method=iif_guard_auto"],
}

# ---------------------------------------------------------------- the rules on hand-built numbers


def test_entropy_guard_skips_exactly_the_drops_that_would_overdraw_the_budget():
    # Walk: +2 would leave the sum > 0 (skip); -1 (sum -1); +0.5 (-0.5); +1 would reach +0.5 (skip);
    # -3 (-3.5); +2 (-1.5).
    change = np.array([2.0, -1.0, 0.5, 1.0, -3.0, 2.0])
    accepted = within_entropy_budget(change)
    assert accepted.tolist() == [False, True, True, False, True, True]
    assert (np.cumsum(change[accepted]) <= 0).all()  # every prefix of the drops keeps the budget


def test_entropy_guard_degenerate_inputs():
    assert within_entropy_budget(np.array([])).tolist() == []
    assert within_entropy_budget(np.zeros(3)).all()  # drops that change nothing are free
    assert not within_entropy_budget(np.array([1e-9, 5.0])).any()


def test_best_drop_count_stops_where_the_held_out_gain_peaks():
    # Predicted held-out gain after dropping the first m: 0, 1, 3, 2.5, 2.6, -0.4: the peak is m = 2.
    assert best_drop_count(np.array([-1.0, -2.0, 0.5, -0.1, 3.0])) == 2
    assert best_drop_count(np.array([0.5, -0.1])) == 0  # the first drop already hurts held-out data
    assert best_drop_count(np.array([-1.0, 0.0, 0.0])) == 1  # ties go to the fewer drops
    assert best_drop_count(np.array([-1.0, -1.0])) == 2  # every drop helps: all candidates
    assert best_drop_count(np.array([])) == 0


# ---------------------------------------------------------------- on real FrozenLake rounds


@pytest.fixture
def trainer_and_buffer(tiny_config):
    """A real FrozenLake buffer from a policy moved away from the near-uniform initialisation (at a
    uniform policy the entropy gradient vanishes and the guard has nothing to weigh)."""
    trainer = Trainer(tiny_config("env=frozenlake", "method=iif_guard"))
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for parameter in trainer.model.parameters():
            parameter.add_(0.5 * torch.randn(parameter.shape, generator=generator))
    buffer = one_network_rollout(trainer.model, trainer.envs, 64, 0.99, 0.95, trainer.action_generator)
    buffer.advantages = torch.randn(len(buffer), generator=generator)  # both signs, as in a rewarded round
    yield trainer, buffer
    trainer.close()


def first_records(buffer: RolloutBuffer, n: int) -> RolloutBuffer:
    columns: dict[str, Any] = {
        f.name: None if getattr(buffer, f.name) is None else getattr(buffer, f.name)[:n] for f in fields(buffer)
    }
    return RolloutBuffer(**columns)


@pytest.mark.parametrize("target", [EntropyTarget(), ReturnTarget(np.arange(0, 64, 3))], ids=["entropy", "subset"])
def test_new_targets_match_the_per_record_definition(trainer_and_buffer, target):
    trainer, buffer = trainer_and_buffer
    fast = influence_scores(trainer.model, buffer, target, PPOConfig())
    slow = reference_scores(trainer.model, buffer, target, PPOConfig())
    assert (slow < 0).any() and (slow > 0).any()
    assert (fast - slow).abs().max() <= 1e-5 * slow.abs().max()


def test_entropy_influence_is_the_first_order_entropy_change_of_a_step_on_the_record(trainer_and_buffer):
    """θ ← θ − η∇ℓ_i changes the policy's mean entropy over the buffer by ≈ η·e_i (the guard's premise)."""
    trainer, buffer = trainer_and_buffer
    ppo, target, eta = PPOConfig(), EntropyTarget(), 1e-5
    scores = influence_scores(trainer.model, buffer, target, ppo)
    attribution = _Attribution(trainer.model, buffer, target, ppo)
    for i in (int(scores.argmax()), int(scores.argmin())):
        params = {k: v.clone().requires_grad_(True) for k, v in attribution.params.items()}
        grads = torch.autograd.grad(attribution.per_record_loss(params, torch.tensor([i]))[0], list(params.values()))
        stepped = {k: v.detach() - eta * g for (k, v), g in zip(params.items(), grads)}
        entropy_before = -target.loss(attribution.policy_fn(attribution.params), buffer)
        entropy_after = -target.loss(attribution.policy_fn(stepped), buffer)
        assert torch.isclose(entropy_after - entropy_before, eta * scores[i], rtol=0.05, atol=1e-9)


def iif_and_guard_drops(trainer, buffer):
    """IIF's and the guard's drops at p = 100 %, the entropy influence, and the invariants every round
    must satisfy: the guard drops only IIF's candidates, skips exactly those that would overdraw the
    entropy budget in IIF's order, and the dropped records' entropy influence sums to ≤ 0."""
    attribute = trainer.attribution(buffer)
    scores, entropy_change = attribute(trainer.target), attribute(EntropyTarget())
    iif = ~DropMostNegative(FilterShare(100)).select(buffer, scores, None).keep
    guarded = ~DropMostNegativeEntropyGuarded(FilterShare(100)).select(buffer, scores, None, attribute).keep
    assert not (guarded & ~iif).any()
    order = np.argsort(scores, kind="stable")[: iif.sum()]
    assert set(order[within_entropy_budget(entropy_change[order])]) == set(np.flatnonzero(guarded))
    assert entropy_change[guarded].sum() <= 0  # the kept update sharpens no faster than the full one
    return iif, guarded, entropy_change


def test_in_a_consensus_round_iif_drops_the_counter_evidence_and_the_guard_keeps_it(trainer_and_buffer):
    """The collapse mechanism on a real policy: the greedy action mostly has the positive advantage, a
    quarter of the signs disagree. IIF's negative records are that counter-evidence, and training on
    each of them would raise the policy's entropy, so the guard drops none."""
    trainer, buffer = trainer_and_buffer
    with torch.no_grad():
        greedy = trainer.model.policy_output(buffer.obs).argmax(-1) == buffer.actions.long()
    flipped = torch.rand(len(buffer), generator=torch.Generator().manual_seed(1)) < 0.25
    buffer.advantages = torch.where(greedy ^ flipped, 1.0, -1.0)
    iif, guarded, entropy_change = iif_and_guard_drops(trainer, buffer)
    assert iif.sum() > 0 and (entropy_change[iif] > 0).all()
    assert guarded.sum() == 0


def test_without_a_consensus_the_guard_lets_iif_drop_as_usual(trainer_and_buffer):
    """Advantages unrelated to the greedy actions (the fixture's): IIF's drops sharpen the policy no
    more than they soften it, and the guard drops exactly what IIF drops."""
    trainer, buffer = trainer_and_buffer
    iif, guarded, _ = iif_and_guard_drops(trainer, buffer)
    assert iif.sum() > 0 and (guarded == iif).all()


def test_held_out_scores_rate_each_record_on_the_half_it_is_not_in(trainer_and_buffer):
    trainer, buffer = trainer_and_buffer
    held_out = held_out_scores(len(buffer), trainer.attribution(buffer), np.random.default_rng(5))
    first = np.zeros(len(buffer), bool)
    first[np.random.default_rng(5).permutation(len(buffer))[: len(buffer) // 2]] = True
    for half, other in ((first, ~first), (~first, first)):
        on_other = reference_scores(trainer.model, buffer, ReturnTarget(np.flatnonzero(other)), PPOConfig()).numpy()
        np.testing.assert_allclose(held_out[half], on_other[half], rtol=1e-4, atol=1e-7)


@pytest.mark.parametrize(
    "method",
    [
        DropMostNegativeEntropyGuarded(FilterShare(50)),
        DropMostNegative(FilterShare(None)),
        DropMostNegativeEntropyGuarded(FilterShare(None)),
    ],
    ids=["guard", "auto", "guard-auto"],
)
def test_degenerate_rounds_keep_every_record(trainer_and_buffer, method):
    trainer, buffer = trainer_and_buffer
    attribute, rng = trainer.attribution(buffer), np.random.default_rng(0)
    equal = np.zeros(len(buffer))  # all scores equal: no negative record
    assert method.select(buffer, equal, rng, attribute).n_kept == len(buffer)
    no_negative = np.abs(attribute(trainer.target))
    assert method.select(buffer, no_negative, rng, attribute).n_kept == len(buffer)


def test_a_single_record_round(trainer_and_buffer):
    trainer, buffer = trainer_and_buffer
    one = first_records(buffer, 1)
    attribute = trainer.attribution(one)
    negative = np.array([-1.0])
    # p=auto has no record to hold out: it drops nothing rather than guessing.
    assert DropMostNegative(FilterShare(None)).select(one, negative, np.random.default_rng(0), attribute).n_kept == 1
    # The guard drops the record exactly when training on it would not raise the entropy.
    sharpens = attribute(EntropyTarget())[0] <= 0
    assert DropMostNegativeEntropyGuarded(FilterShare(100)).select(one, negative, None, attribute).n_kept == int(
        not sharpens
    )


def test_every_record_negative_p_auto_drops_a_prefix_of_iif_order(trainer_and_buffer):
    trainer, buffer = trainer_and_buffer
    attribute = trainer.attribution(buffer)
    scores = -np.abs(attribute(trainer.target)) - 1e-9
    dropped = ~DropMostNegative(FilterShare(None)).select(buffer, scores, np.random.default_rng(0), attribute).keep
    order = np.argsort(scores, kind="stable")
    assert set(np.flatnonzero(dropped)) == set(order[: dropped.sum()])


# ---------------------------------------------------------------- config and run identity


@pytest.mark.parametrize("tag", list(ROBUST))
def test_each_variant_has_a_run_dir_of_its_own(tag):
    cfg = compose_config(ROBUST[tag])
    validate(cfg)
    assert str(relative_run_dir(cfg)) == f"frozenlake/sgd/{tag}/seed0"
    assert str(relative_run_dir(compose_config(["env=minigrid", *ROBUST[tag]]))).endswith(
        tag.replace("p50", "p12.5") + "/seed0"
    )  # the guard's p is the env's paper p


@pytest.mark.parametrize("preset,spelled_out", [("iif_auto", "iif"), ("iif_guard_auto", "iif_guard")])
def test_a_p_auto_preset_is_the_same_run_as_method_p_auto(preset, spelled_out):
    assert relative_run_dir(compose_config([f"method={preset}"])) == relative_run_dir(
        compose_config([f"method={spelled_out}", "method.p=auto"])
    )


@pytest.mark.parametrize(
    "overrides,allowed",
    [
        (["method.p=abc"], "(0, 100] or auto"),
        (["method=iif_guard", "method.p=0"], "(0, 100] or auto"),
        (["method=random", "method.p=auto"], "p=auto is for method=iif, iif_guard"),
        (["method=advantage", "method.variant=h1", "method.p=auto"], "p=auto is for method=iif, iif_guard"),
    ],
)
def test_bad_p_is_one_line_naming_the_key_and_what_is_allowed(overrides, allowed):
    message = config_refusal(*overrides)
    assert message.startswith("method.p=") and allowed in message


# ---------------------------------------------------------------- the round loop


@pytest.mark.parametrize("tag", list(ROBUST))
def test_each_variant_runs_through_the_round_loop(tmp_path, tiny_config, tag):
    summary = run_task(tiny_config("env=frozenlake", *ROBUST[tag], "env.rounds=3"), tmp_path)
    auto = tag.endswith("pauto")
    assert summary["done"] and summary["method_tag"] == tag
    assert summary["p"] == (None if auto else 50.0)  # the results table's p is a number
    rows = metrics_rows(tmp_path)[1:]
    for row in rows:
        n_negative, n_kept = int(float(row["n_negative"])), int(row["n_kept"])
        most_dropped = n_negative if auto else n_to_drop(-np.ones(n_negative), FilterShare(50))
        assert 64 - most_dropped <= n_kept <= 64
        assert np.isfinite(float(row["policy_loss"])) and np.isfinite(float(row["test_return"]))
    assert json.loads((tmp_path / "summary.json").read_text()) == summary


def test_p_auto_is_reproducible_from_the_seed(tmp_path, tiny_config):
    """The held-out halves come from the run's seeded selection RNG."""
    for name in ("a", "b"):
        run_task(tiny_config("env=frozenlake", *ROBUST["iif_guard-pauto"], "seed=4"), tmp_path / name)
    assert metrics_rows(tmp_path / "a", timings=False) == metrics_rows(tmp_path / "b", timings=False)
