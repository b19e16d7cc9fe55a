"""env=gym: any registered Gymnasium env in our trainer, its policy chosen from the env's spaces, its runs
filed under its id; the paper's presets keep their configs and run dirs."""

from __future__ import annotations

import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest

from conftest import cli_refusal, compose_config, config_refusal, metrics_rows
from rlinfluence.cli import run_task
from rlinfluence.control.fit import GYM_FIT_HINT
from rlinfluence.control.trainer import Trainer
from rlinfluence.envs.make import fitting_network, fitting_wrappers
from rlinfluence.run import rundir
from rlinfluence.run.identity import config_hash, digest, non_default_settings


def gym_config(tmp_path, env_id: str, *overrides: str):
    return compose_config(["debug=smoke", "env=gym", f"env.id={env_id}", f"runs_root={tmp_path}", *overrides])


@pytest.mark.parametrize(
    "env_id,wrappers,head",
    [
        ("CartPole-v1", [], "CategoricalHead"),  # vector observation, Discrete actions
        ("Pendulum-v1", [], "GaussianHead"),  # Box actions
        ("FrozenLake-v1", ["one_hot"], "CategoricalHead"),  # Discrete observation
    ],
)
def test_a_gym_env_trains_two_rounds_into_a_run_dir_named_by_its_id(tmp_path, env_id, wrappers, head):
    cfg = gym_config(tmp_path, env_id)
    assert list(cfg.env.wrappers) == wrappers and cfg.env.network.kind == "mlp"
    summary = run_task(cfg)
    assert summary is not None and summary["done"] and summary["rounds_completed"] == 2
    assert summary["env"] == f"gym-{env_id}"  # what figures.experiment draws one figure per
    run_dir = rundir.run_dir(cfg)
    assert run_dir.relative_to(tmp_path).parts[:2] == ("default", f"gym-{env_id}")
    rows = metrics_rows(run_dir)
    assert [int(row["round"]) for row in rows] == [0, 1, 2]
    assert np.isfinite(float(rows[-1]["test_return"]))
    trainer = Trainer(cfg)
    assert type(trainer.model.action_head).__name__ == head
    trainer.close()


def test_the_spaces_choose_the_wrappers_and_the_network():
    image = gym.spaces.Box(0, 255, (7, 7, 3), np.uint8)
    assert fitting_wrappers(gym.spaces.Discrete(16)) == ["one_hot"]
    assert fitting_wrappers(gym.spaces.Dict({"image": image, "direction": gym.spaces.Discrete(4)})) == [
        "minigrid_image"
    ]
    assert fitting_wrappers(gym.spaces.Box(0, 255, (96, 96, 3), np.uint8)) == ["channel_first"]
    assert fitting_wrappers(gym.spaces.Box(-1.0, 1.0, (4,), np.float32)) == []
    assert fitting_network(gym.spaces.Box(0, 255, (3, 7, 7), np.uint8)) == "cnn"
    assert fitting_network(gym.spaces.Box(0, 255, (3, 96, 96), np.uint8)) == "nature_cnn"
    assert fitting_network(gym.spaces.Box(-1.0, 1.0, (4,), np.float32)) == "mlp"


def test_minigrid_gets_its_image_and_the_cnn_and_the_command_line_still_wins():
    cfg = compose_config(["env=gym", "env.id=minigrid:MiniGrid-Empty-5x5-v0"])  # module:Id registers it
    assert list(cfg.env.wrappers) == ["minigrid_image"] and cfg.env.network.kind == "cnn"
    chosen = compose_config(["env=gym", "env.id=CartPole-v1", "env.network.kind=mlp", "env.wrappers=[]"])
    assert config_hash(chosen) is None  # what the spaces would choose: the preset's run


def test_two_ids_never_share_a_run_dir():
    dirs = {
        rundir.relative_run_dir(compose_config(["env=gym", f"env.id={env_id}"]))
        for env_id in ("CartPole-v1", "Acrobot-v1", "minigrid:MiniGrid-Empty-5x5-v0", "MiniGrid-Empty-5x5-v0")
    }
    assert len(dirs) == 4
    [minigrid] = [d for d in dirs if "minigrid%3A" in str(d)]
    assert minigrid.parts[0] == "gym-minigrid%3AMiniGrid-Empty-5x5-v0"  # one folder: `:` and `/` encoded


def test_the_default_id_and_settings_run_without_a_hash():
    cfg = compose_config(["env=gym", "env.id=Pendulum-v1"])
    assert config_hash(cfg) is None and str(rundir.relative_run_dir(cfg)) == "gym-Pendulum-v1/sgd/iif-p50/seed0"
    # Another setting is hashed into the leaf; the id is not among the hashed ones (the folder names it).
    rounds = compose_config(["env=gym", "env.id=Pendulum-v1", "env.rounds=2"])
    assert non_default_settings(rounds) == {"env.rounds": 2}
    assert str(rundir.relative_run_dir(rounds)) == f"gym-Pendulum-v1/sgd/iif-p50-{digest({'env.rounds': 2})}/seed0"


def test_an_unregistered_id_is_refused_in_one_line_naming_env_id(tmp_path):
    message = config_refusal("env=gym", "env.id=NoSuchEnv-v0")
    assert message.startswith("env.id=NoSuchEnv-v0 is not a gymnasium env this machine can make (NameNotFound")
    command = [sys.executable, "-m", "rlinfluence", "env=gym", "env.id=NoSuchEnv-v0", f"runs_root={tmp_path}"]
    line = cli_refusal(subprocess.run(command, capture_output=True, text=True, timeout=120))
    assert line == f"rlinfluence: config error: {message}" and not any(tmp_path.iterdir())


def test_a_space_the_rule_does_not_fit_is_refused_with_env_gym_s_hint():
    message = config_refusal("env=gym", "env.id=Blackjack-v1")  # a Tuple observation
    assert message.startswith("env.id=Blackjack-v1 observes Tuple(") and message.endswith(GYM_FIT_HINT)


def test_a_paper_preset_with_a_non_fitting_id_points_to_env_gym():
    message = config_refusal("env=acrobot", "env.id=Pendulum-v1")
    assert message.startswith("env.id=Pendulum-v1 has continuous actions")
    assert message.endswith("; for another Gymnasium env use env=gym env.id=<id>")


# Recorded before env=gym existed (commit 56f437e): the presets' run dirs and hashes are unchanged.
PRESET_RUN_DIRS = {
    ("env=frozenlake",): "frozenlake/sgd/iif-p50/seed0",
    ("env=acrobot", "method=ppo"): "acrobot/sgd/ppo/seed0",
    ("env=minigrid",): "minigrid/sgd/iif-p12.5/seed0",
    ("env=lunarlander", "optimizer=adam"): "lunarlander/adam/iif-p12.5/seed0",
    ("env=highway",): "highway/sgd/iif-p50/seed0",
    ("env=bipedalwalker",): "bipedalwalker/adam/iif-p6.25/seed0",
    ("env=acrobot", "debug=smoke"): "acrobot/sgd/iif-p50-8f9afb/seed0",
    ("env=minigrid", "debug=smoke"): "minigrid/sgd/iif-p12.5-8f9afb/seed0",
}


@pytest.mark.parametrize("overrides,run_dir", PRESET_RUN_DIRS.items(), ids=" ".join)
def test_the_paper_presets_keep_their_run_dirs(overrides, run_dir):
    assert str(rundir.relative_run_dir(compose_config(list(overrides)))) == run_dir
