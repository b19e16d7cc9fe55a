"""The stacked engine's evaluation (control/stacked_evaluation.py) against each seed's Evaluator.evaluate: the same test
return and SEM, bit for bit, for every seed of a batch, on the batched simulator and on the library's envs."""

from __future__ import annotations

import pytest
import torch

from conftest import compose_config
from rlinfluence.control.stacked_evaluation import simulator_for, stacked_evaluation
from rlinfluence.control.trainer import Trainer
from rlinfluence.envs.batched import BatchedAcrobot, BatchedFrozenLake

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest's: a run's torch_threads


def seed_trainers(*overrides: str) -> list[Trainer]:
    """Three seeds' trainers; 13 test episodes on 4 slots, so slots end at different steps and some idle."""
    return [
        Trainer(compose_config(["debug=smoke", "eval.episodes=13", "eval.n_parallel=4", *overrides, f"seed={seed}"]))
        for seed in (4, 0, 9)
    ]


@pytest.mark.parametrize(
    "env, simulator, action_bias",
    [
        ("frozenlake", BatchedFrozenLake, [-1.0, 1.0, 1.0, -1.0]),  # mostly down and right: some reach the goal
        ("acrobot", BatchedAcrobot, [1.5, 0.0, 1.5]),  # full torque: episodes end at many lengths
    ],
)
def test_each_seeds_evaluation_on_the_simulator_is_its_evaluators(env, simulator, action_bias):
    trainers = seed_trainers(f"env={env}")
    for trainer in trainers:
        with torch.no_grad():
            trainer.model.action_head.linear.bias.copy_(torch.tensor(action_bias))
    assert type(simulator_for(trainers)) is simulator
    for k in (0, 3):
        expected = [trainer.evaluate(k) for trainer in trainers]
        assert stacked_evaluation(trainers, k) == expected
        assert len({row["test_return"] for row in expected}) >= 2  # the seeds play episodes of their own
        assert any(row["test_return_sem"] > 0 for row in expected)  # episodes of many lengths or returns


def test_an_env_without_a_simulator_evaluates_on_its_library_envs():
    trainers = seed_trainers("env=gym", "env.id=CartPole-v1")
    assert simulator_for(trainers) is None
    assert stacked_evaluation(trainers, 1) == [trainer.evaluate(1) for trainer in trainers]
