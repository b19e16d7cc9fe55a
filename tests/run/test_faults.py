"""Runs that survive faults: W&B failures and degenerate rounds never crash training or make NaN."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from conftest import metrics_rows, one_network_rollout, one_network_update
from rlinfluence.cli import run_task
from rlinfluence.config.schema import InfluenceConfig, PPOConfig
from rlinfluence.control.trainer import Trainer
from rlinfluence.influence import compute_influence
from rlinfluence.selection import DropMostNegative, Selection
from rlinfluence.share import FilterShare
from rlinfluence.targets import ReturnTarget


def test_wandb_online_without_network_is_reported_once_and_training_continues(
    tmp_path, tiny_config, capfd, monkeypatch
):
    monkeypatch.setenv("WANDB_API_KEY", "0" * 40)  # a key, but no network to reach the server
    monkeypatch.delenv("WANDB_MODE", raising=False)
    summary = run_task(tiny_config("logger=wandb", "logger.mode=online", "logger.init_timeout=2"), tmp_path)
    assert summary["done"]
    assert len(metrics_rows(tmp_path)) == 3
    assert capfd.readouterr().err.count("W&B mirror disabled") == 1


@pytest.fixture
def trainer_and_buffer(tiny_config):
    """A real FrozenLake buffer from a real policy."""
    trainer = Trainer(tiny_config("env=frozenlake", "method=iif"))
    buffer = one_network_rollout(trainer.model, trainer.envs, 64, 0.99, 0.95, trainer.action_generator)
    yield trainer, buffer
    trainer.close()


def update(trainer, buffer, keep) -> dict[str, float]:
    return one_network_update(
        trainer.model, trainer.optimizer, buffer, Selection(keep), PPOConfig(batch_size=32), np.random.default_rng(0)
    )


def all_finite(stats: dict[str, float]) -> bool:
    return all(math.isfinite(v) for v in stats.values())


def test_all_advantages_equal_gives_zero_scores_and_a_finite_update(trainer_and_buffer):
    trainer, buffer = trainer_and_buffer
    buffer.advantages = torch.full_like(buffer.advantages, 0.7)
    scores = compute_influence(trainer.model, buffer, ReturnTarget(), PPOConfig(), InfluenceConfig()).numpy()
    assert np.isfinite(scores).all()
    assert DropMostNegative(FilterShare(50)).select(buffer, scores, None).n_kept == len(buffer)
    assert all_finite(update(trainer, buffer, np.ones(len(buffer), bool)))


def test_every_record_negative_with_p100_keeps_nothing_and_leaves_the_policy_unchanged(trainer_and_buffer):
    trainer, buffer = trainer_and_buffer
    selection = DropMostNegative(FilterShare(100)).select(buffer, -np.ones(len(buffer)), None)
    before = [p.clone() for p in trainer.model.parameters()]
    stats = update(trainer, buffer, selection.keep)
    assert selection.n_kept == 0 and stats["gradient_steps"] == 0 and all_finite(stats)
    assert all(torch.equal(a, b) for a, b in zip(before, trainer.model.parameters()))


@pytest.mark.parametrize("n_kept", [1, 5])
def test_kept_set_smaller_than_one_minibatch_still_trains(trainer_and_buffer, n_kept):
    trainer, buffer = trainer_and_buffer
    keep = np.zeros(len(buffer), bool)
    keep[:n_kept] = True
    before = [p.clone() for p in trainer.model.parameters()]
    stats = update(trainer, buffer, keep)
    assert stats["gradient_steps"] == PPOConfig().n_epochs and all_finite(stats)
    assert not all(torch.equal(a, b) for a, b in zip(before, trainer.model.parameters()))


def test_episode_longer_than_the_buffer(tmp_path, tiny_config):
    """Acrobot episodes last up to 500 steps; with 16-step rounds every round ends mid-episode."""
    run_task(tiny_config("env=acrobot", "env.n_steps=16", "ppo.batch_size=8", "env.rounds=3"), tmp_path)
    rows = metrics_rows(tmp_path)[1:]
    for row in rows:
        assert all(math.isfinite(float(row[k])) for k in ("policy_loss", "value_loss", "approx_kl", "test_return"))
