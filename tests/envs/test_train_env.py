"""env.train_make_kwargs: the collection env is made with env.make_kwargs and these merged over them, while
evaluation keeps env.make_kwargs (issue 42, lead 1: the authors' standard-training script made the id's
defaults). Empty, the default, leaves every run as it was."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from highway_env.envs.common.abstract import AbstractEnv

from conftest import cli_refusal, compose_config, config_refusal
from rlinfluence.cli import run_task
from rlinfluence.control.engine import Seed
from rlinfluence.envs.make import make_env
from rlinfluence.run.checkpoint import RunDirError
from rlinfluence.run.identity import IDENTITY, config_hash, result_settings
from rlinfluence.run.rundir import run_leaf
from rlinfluence.validation import validate

SLIPPERY = "+env.train_make_kwargs={is_slippery: true}"


def outcomes(env) -> int:
    """FrozenLake's possible next states from the start under action 0: 3 on slippery ice, 1 otherwise."""
    return len(env.unwrapped.P[0][0])


def test_the_overlay_collects_on_slippery_ice_and_tests_on_the_preset():
    cfg = compose_config(["+experiment=fidelity_train_env", "method=ppo", "debug=smoke"])
    validate(cfg)
    trainer = Seed(cfg)
    try:
        assert [outcomes(env) for env in trainer.envs.envs] == [3] * cfg.env.n_envs
        assert {outcomes(env) for env in trainer.evaluator.envs} == {1}
    finally:
        trainer.close()
    assert cfg.experiment_name == "fidelity_train_env"
    assert run_leaf(cfg).startswith("ppo-")  # its own run dir, beside the committed standard runs


def test_only_the_collection_differs():
    """Same seed: the same initial policy scores the same at round 0 (the evaluation env is unchanged), and
    the first round's records differ (they were collected on slippery ice)."""
    trainers = [Seed(compose_config(["method=ppo", "debug=smoke", *extra])) for extra in ([], [SLIPPERY])]
    try:
        plain, slippery = trainers
        assert plain.evaluate(0) == slippery.evaluate(0)
        assert not np.array_equal(plain.collect(1).obs, slippery.collect(1).obs)
    finally:
        for trainer in trainers:
            trainer.close()


def config_of(env) -> dict:
    """highway-env's config of the env below the wrappers (highway-env ships no types)."""
    highway = env.unwrapped
    assert isinstance(highway, AbstractEnv)
    return highway.config


def test_highway_collects_in_highway_v0s_traffic_and_tests_at_ten_vehicles():
    cfg = compose_config(["env=highway", "+env.train_make_kwargs.config.vehicles_count=50"])
    validate(cfg)
    collected, tested = (config_of(make_env(cfg.env, collection=c)) for c in (True, False))
    assert (collected["vehicles_count"], tested["vehicles_count"]) == (50, 10)
    assert collected["simulation_frequency"] == tested["simulation_frequency"] == 5  # the rest is the preset's


@pytest.mark.parametrize(
    "overrides,says",
    [
        (["+env.train_make_kwargs={map_name: 8x8}"], "change the spaces: the collection env observes Box of shape (64"),
        (["env=highway", "+env.train_make_kwargs.config.observation.vehicles_count=7"], "change the spaces"),
        (["+env.train_make_kwargs={bogus: 1}"], "env.id=FrozenLake-v1 cannot be made with them (TypeError"),
        (["+env.train_make_kwargs={is_slippery: false}"], "changes nothing of env.make_kwargs"),
        (["env=toxicity_tiny", "+env.train_make_kwargs={is_slippery: true}"], "(env.agent=lm) makes none"),
    ],
)
def test_kwargs_that_make_no_sense_are_refused_in_one_line(overrides, says):
    message = config_refusal(*overrides)
    assert message.startswith("env.train_make_kwargs") and says in message


def test_the_cli_refuses_with_exit_2_and_writes_nothing(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "rlinfluence", "+env.train_make_kwargs={map_name: 8x8}", f"runs_root={tmp_path}"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "config error: env.train_make_kwargs={'map_name': '8x8'} change the spaces" in cli_refusal(result)
    assert not any(tmp_path.iterdir())


def test_empty_leaves_every_runs_identity_as_it_was():
    assert not any(key.startswith("env.train_make_kwargs") for key in result_settings(compose_config([])))
    assert config_hash(compose_config(["env=frozenlake", "method=ppo"])) is None
    # The committed main comparison's Highway runs (paper_figures/data/main.csv: eval.episodes=50).
    assert config_hash(compose_config(["env=highway", "eval.episodes=50"])) == "bac18f"


def test_a_run_records_the_setting_and_is_told_apart_by_it(tmp_path):
    tiny = ["method=ppo", "debug=smoke", "env.rounds=1", "logger=disabled"]
    run_task(compose_config([*tiny, SLIPPERY]), tmp_path)
    assert json.loads((tmp_path / IDENTITY).read_text())["non_default"]["env.train_make_kwargs.is_slippery"] is True
    assert run_task(compose_config([*tiny, SLIPPERY]), tmp_path) is None  # the same run: finished, skipped
    with pytest.raises(RunDirError, match="made with env.train_make_kwargs.is_slippery=true"):
        run_task(compose_config(tiny), tmp_path)  # the preset's collection env is another run
