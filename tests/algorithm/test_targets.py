"""targets.py: f_action's s* is given as a flat list, whatever the shape of the env's observations."""

from __future__ import annotations

from conftest import tiny
from rlinfluence.cli import run_task


def test_an_action_target_on_an_image_env_is_given_flat(tmp_path):
    state = "target.state=[" + ",".join(["0"] * 3 * 7 * 7) + "]"
    cfg = tiny(tmp_path, "env=minigrid", "env.rounds=1", "target=action", state, "target.action=[2]")
    assert run_task(cfg)["done"]
