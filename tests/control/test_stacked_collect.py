"""The stacked engine's collection (control/stacked_collect.py): every seed's training envs stepped on one batched
simulator give each seed the records its library envs give, bit for bit, round after round (episode ends and time-limit
truncations included), after a checkpoint is loaded (each episode in progress replayed on the simulator), and
under the collection protocols."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

import rlinfluence.control.engine as engine
from conftest import compose_config
from rlinfluence.control.collect import LibraryEnvs, SimulatorSlots
from rlinfluence.control.engine import Stack
from rlinfluence.control.trainer import Trainer

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest's: a run's torch threads

SEEDS = (4, 0, 9)
# Short time limits, and policies that end some episodes before them: truncations and ends in every round.
ENVS = {
    "frozenlake": (
        ["env=frozenlake", "+env.make_kwargs.max_episode_steps=12", "env.n_steps=40"],
        [1.0, 0.0, 0.0, 1.0],  # mostly left and up, against the start's walls: some episodes reach a hole
    ),
    # full torque: one episode in the three rounds ends before its time limit
    "acrobot": (["env=acrobot", "+env.make_kwargs.max_episode_steps=300", "env.n_steps=200"], [1.5, 0.0, 1.5]),
}


def seed_trainers(env: str, *overrides: str) -> list[Trainer]:
    settings, action_bias = ENVS[env]
    trainers = []
    for seed in SEEDS:
        cfg = compose_config(["debug=smoke", "env.n_envs=2", *settings, *overrides, f"seed={seed}"])
        trainer = Trainer(cfg)
        with torch.no_grad():
            trainer.model.action_head.linear.bias.copy_(torch.tensor(action_bias))
        trainers.append(trainer)
    return trainers


def collected(trainers: list[Trainer], k: int) -> list[dict]:
    """Each seed's round-k records, field by field, and its train return."""
    buffers = Stack(trainers).collect(k)
    return [
        {field.name: getattr(buffer, field.name) for field in dataclasses.fields(buffer)}
        | {"train_return": trainer.train_return(buffer)}
        for trainer, buffer in zip(trainers, buffers)
    ]


def assert_equal(simulated: list[dict], library: list[dict]) -> None:
    assert len(simulated) == len(library)
    for ours, theirs in zip(simulated, library):
        assert ours.keys() == theirs.keys()
        for name, value in ours.items():
            if value is None or theirs[name] is None:
                assert value is theirs[name], name
            else:
                assert np.array_equal(np.asarray(value), np.asarray(theirs[name]), equal_nan=True), name


def episode_lengths(rounds: list[list[dict]]) -> set[int]:
    """The lengths of the episodes that ended in the rounds' rollouts, all started in the first round."""
    lengths = set()
    for seed in range(len(SEEDS)):
        dones = np.concatenate([records[seed]["dones"].numpy().reshape(2, -1) for records in rounds], axis=1)
        for env_dones in dones:
            lengths |= set(np.diff(np.flatnonzero(np.concatenate([[1], env_dones]))).tolist())
    return lengths


@pytest.mark.parametrize("env", ["frozenlake", "acrobot"])
@pytest.mark.parametrize("protocol", [(), ("collection.abandon_unfinished=true", "collection.repeat_starts=true")])
def test_the_seeds_envs_on_one_simulator_collect_what_their_library_envs_collect(env, protocol, monkeypatch):
    simulated, library = seed_trainers(env, *protocol), seed_trainers(env, *protocol)
    limit = simulated[0].cfg.env.make_kwargs.max_episode_steps
    rounds = []
    for k in (1, 2, 3):
        ours = collected(simulated, k)
        with monkeypatch.context() as patched:
            patched.setattr(engine, "collection_simulator", lambda trainers: None)  # the library's envs, as before
            theirs = collected(library, k)
        assert_equal(ours, theirs)
        rounds.append(theirs)
    assert all(isinstance(trainer.envs.backend, SimulatorSlots) for trainer in simulated)
    assert all(isinstance(trainer.envs.backend, LibraryEnvs) for trainer in library)
    if not protocol:  # a restarted round's episodes are cut at its end, before the time limit
        lengths = episode_lengths(rounds)
        assert limit in lengths and min(lengths) < limit  # truncations and episode ends


@pytest.mark.parametrize("env", ["frozenlake", "acrobot"])
def test_a_loaded_checkpoint_continues_on_a_new_simulator_as_it_would_have(env):
    """Seeds loaded mid-episode from their checkpoints, in another order and fewer: each episode in progress is
    replayed on the simulator, and round 3 collects what the seeds' uninterrupted round 3 collects."""
    trainers = seed_trainers(env)
    for k in (1, 2):
        collected(trainers, k)
    checkpoints = [trainer.envs.state_dict() for trainer in trainers]
    assert any(actions for checkpoint in checkpoints for actions in checkpoint["episode_actions"])  # mid-episode
    resumed = seed_trainers(env)[::-1][:2]  # seeds 9 and 0
    for trainer, checkpoint in zip(resumed, checkpoints[::-1]):
        trainer.load_state_dict(trainers[SEEDS.index(trainer.cfg.seed)].state_dict(2))
        assert trainer.envs.state_dict() == checkpoint
    expected = collected(trainers, 3)
    ours = collected(resumed, 3)
    assert all(isinstance(trainer.envs.backend, SimulatorSlots) for trainer in resumed)
    assert_equal(ours, [expected[2], expected[1]])
