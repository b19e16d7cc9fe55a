"""targets.py: f_action's s* is given as a flat list, whatever the shape of the env's observations."""

from __future__ import annotations

import torch

from conftest import rounds_in, tiny
from rlinfluence.cli import run_task
from rlinfluence.control.trainer import Trainer
from rlinfluence.run.rundir import run_dir
from rlinfluence.targets import ActionTarget


def test_an_action_target_on_an_image_env_is_given_flat(tmp_path):
    # Distinct values, so that the test sees where each entry lands, not only how many there are.
    flat = list(range(3 * 7 * 7))
    state = "target.state=[" + ",".join(map(str, flat)) + "]"
    cfg = tiny(tmp_path, "env=minigrid", "env.rounds=1", "target=action", state, "target.action=[2]")
    trainer = Trainer(cfg)
    assert isinstance(trainer.target, ActionTarget) and trainer.envs.observation_space.shape == (3, 7, 7)
    # s* is the flat list in the observation's (channel-first) shape, row-major, as a batch of one.
    expected = torch.tensor(flat, dtype=torch.float32).reshape(1, 3, 7, 7)
    assert isinstance(trainer.target.state, torch.Tensor) and torch.equal(trainer.target.state, expected)
    assert torch.equal(trainer.target.action, torch.tensor([[2.0]]))
    summary = run_task(cfg)
    assert summary is not None and summary["done"] and summary["rounds_completed"] == 1
    assert rounds_in(run_dir(cfg)) == [0, 1]
