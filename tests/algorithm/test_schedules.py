"""rl-zoo's linear lr and clip-range schedules (`ppo.lr_schedule`, `ppo.clip_range_schedule`): their
values, that `constant` is the update as it was, and that resumed and replayed rounds get their own."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch

from conftest import compose_config, config_refusal, metrics_rows
from rlinfluence.analyses.standard_run import before_round, matches_run, rerun_update
from rlinfluence.cli import run_task
from rlinfluence.control.engine import Seed
from rlinfluence.run.checkpoint import CHECKPOINT, snapshot_path
from rlinfluence.selection import Selection
from rlinfluence.update import scheduled

LINEAR = ["ppo.lr_schedule=linear", "ppo.clip_range_schedule=linear"]


def test_linear_is_the_zoos_lin_value_after_each_rounds_rollout():
    # 10 rounds: round k's update has progress_remaining 1 - k/10 (SB3 counts the round's rollout as done).
    assert scheduled(0.1, "linear", 1, 10) == pytest.approx(0.09)
    assert scheduled(0.1, "linear", 5, 10) == pytest.approx(0.05)
    assert scheduled(0.1, "linear", 10, 10) == 0.0
    assert scheduled(2.5e-4, "linear", 2, 4) == pytest.approx(1.25e-4)
    assert [scheduled(2.5e-4, "constant", k, 4) for k in (1, 2, 4)] == [2.5e-4] * 3


def test_the_trainer_updates_with_the_rounds_values(tiny_config):
    trainer = Seed(tiny_config("env=frozenlake", "env.rounds=4", *LINEAR))  # sgd, lr 5e-3, clip 0.2
    try:
        assert trainer.learning_rate(1) == pytest.approx(3.75e-3)
        assert trainer.ppo_settings(1).clip_range == pytest.approx(0.15)
        assert trainer.ppo_settings(2).clip_range == pytest.approx(0.1) and trainer.cfg.ppo.clip_range == 0.2
        buffer = trainer.collect(2)
        before = {name: value.clone() for name, value in trainer.model.state_dict().items()}
        trainer.update(2, buffer, Selection(np.ones(len(buffer), bool)))  # lr 2.5e-3: SGD moves θ
        assert not all(torch.equal(value, before[name]) for name, value in trainer.model.state_dict().items())
        before = {name: value.clone() for name, value in trainer.model.state_dict().items()}
        trainer.update(4, buffer, Selection(np.ones(len(buffer), bool)))  # lr 0: SGD leaves θ as it is
        assert all(torch.equal(value, before[name]) for name, value in trainer.model.state_dict().items())
    finally:
        trainer.close()


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_constant_is_the_update_with_the_configured_values(tiny_config, optimizer):
    """Under the default schedules every round's update reads the config's lr and PPO settings as they are (the
    update reads no other schedule-dependent value)."""
    seed = Seed(tiny_config("env=lunarlander", f"optimizer={optimizer}"))
    try:
        for k in range(1, seed.cfg.env.rounds + 1):
            assert seed.learning_rate(k) == seed.cfg.optimizer.lr
            assert seed.ppo_settings(k) == seed.cfg.ppo
    finally:
        seed.close()


def test_a_linear_run_resumes_and_replays_its_rounds_exactly(tmp_path, tiny_config):
    cfg = tiny_config("env=frozenlake", "method=ppo", "env.rounds=4", "checkpoint.snapshots=true", *LINEAR)
    run_task(cfg, tmp_path / "run")
    # Resumed after round 2, as if killed there: rounds 3 and 4 again with their own lr and clip.
    shutil.copytree(tmp_path / "run", tmp_path / "resumed")
    shutil.copy(snapshot_path(tmp_path / "resumed", 2), tmp_path / "resumed" / CHECKPOINT)
    (tmp_path / "resumed" / "DONE").unlink()
    run_task(cfg, tmp_path / "resumed")
    assert metrics_rows(tmp_path / "resumed", timings=False) == metrics_rows(tmp_path / "run", timings=False)
    # The analyses' replay of round 3 from its snapshot gives the run's θ_4.
    trainer = Seed(cfg)
    try:
        start = before_round(trainer, tmp_path / "run", 3)
        buffer = trainer.collect(3)
        rerun_update(trainer, start, buffer, Selection(np.ones(len(buffer), bool)))
        assert matches_run(trainer, tmp_path / "run", 3)
    finally:
        trainer.close()


@pytest.mark.parametrize("key", ["ppo.lr_schedule", "ppo.clip_range_schedule"])
def test_an_unknown_schedule_is_one_line_naming_the_key_and_the_choices(key):
    assert config_refusal(f"{key}=cosine") == f"{key}='cosine' is not one of: constant, linear"


def test_pong_decays_lr_and_clip_as_the_zoo_and_no_other_env_does():
    pong = compose_config(["env=pong"]).ppo
    assert (pong.lr_schedule, pong.clip_range_schedule, pong.clip_range) == ("linear", "linear", 0.1)
    for env in ("frozenlake", "acrobot", "minigrid", "lunarlander", "highway", "bipedalwalker"):
        ppo = compose_config([f"env={env}"]).ppo
        assert (ppo.lr_schedule, ppo.clip_range_schedule) == ("constant", "constant"), env
