"""The batched simulators (src/rlinfluence/envs/batched.py) against the library's envs as `make_env` builds them,
side by side in one process: N library envs and one batched simulator of N slots get the same reset seeds and
actions, and every slot's observation (values and dtype), reward, termination, truncation and simulator state
must be bit-identical at every step, through holes, goals, swing-ups, wrapped angles and time limits."""

from __future__ import annotations

from collections import Counter
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.envs.toy_text.frozen_lake import FrozenLakeEnv

from conftest import compose_config
from rlinfluence.envs.batched import BatchedAcrobot, BatchedFrozenLake, BatchedSimulator, batched_simulator
from rlinfluence.envs.make import make_env

SLOTS = 8


def acrobot_actions(rng: np.random.Generator, observations: np.ndarray) -> np.ndarray:
    """Half the slots uniform random (their episodes run into the time limit), half pumping energy with the
    second joint's swing, noisily (they swing up and terminate, wrapping their angles on the way)."""
    pumping = np.where(observations[:, 5] > 0, 2, 0)
    random = rng.integers(3, size=len(observations))
    pumped = (np.arange(len(observations)) % 2 == 1) & (rng.random(len(observations)) < 0.9)
    return np.where(pumped, pumping, random)


def frozenlake_actions(rng: np.random.Generator, observations: np.ndarray) -> np.ndarray:
    """Half the slots uniform random, half mostly pushing against the left wall (they run into the time limit)."""
    random = rng.integers(4, size=len(observations))
    return np.where((np.arange(len(observations)) % 2 == 1) & (rng.random(len(observations)) < 0.97), 0, random)


def library_state(env: gym.Env) -> np.ndarray:
    unwrapped: Any = env.unwrapped
    return np.asarray(unwrapped.s if isinstance(unwrapped, FrozenLakeEnv) else unwrapped.state)


def play_side_by_side(
    library: list[gym.Env], ours: BatchedSimulator, steps: int, first_seed: int, masked: bool = False
) -> Counter:
    """Step both from seeds first_seed, first_seed + 1, ... (a slot takes the next seed when its episode ends);
    `masked`: each step advances a random half of the slots (`step(actions, slots)`), the others wait."""
    rng = np.random.default_rng(first_seed)
    policy = frozenlake_actions if isinstance(ours, BatchedFrozenLake) else acrobot_actions
    seen: Counter[str] = Counter()
    slots = np.arange(len(library))
    seeds = first_seed + slots
    expected = np.stack([env.reset(seed=int(seed))[0] for env, seed in zip(library, seeds)])
    got = ours.reset(slots, seeds)
    next_seed = first_seed + len(library)
    for _ in range(steps):
        assert np.array_equal(got, expected) and got.dtype == expected.dtype
        assert np.array_equal(ours.state.T if ours.state.ndim == 2 else ours.state, [library_state(e) for e in library])
        stepping = np.flatnonzero(rng.random(len(library)) < 0.5) if masked else slots
        if len(stepping) == 0:
            continue
        actions = policy(rng, got)[stepping]
        before = ours.state.copy()
        results = [library[i].step(int(action)) for i, action in zip(stepping, actions)]
        stepped, rewards, terminated, truncated = ours.step(actions, stepping if masked else None)
        got[stepping] = stepped
        expected[stepping] = np.stack([result[0] for result in results])
        assert np.array_equal(stepped, expected[stepping]) and stepped.dtype == expected.dtype
        assert np.array_equal(rewards, [float(result[1]) for result in results]) and rewards.dtype == np.float64
        assert np.array_equal(terminated, [result[2] for result in results])
        assert np.array_equal(truncated, [result[3] for result in results])
        seen["terminations"] += terminated.sum()
        seen["time limits"] += (truncated & ~terminated).sum()
        seen["rewarded"] += (rewards > 0).sum()
        if isinstance(ours, BatchedAcrobot):  # an angle past 2 rad that changed sign went round through ±pi
            seen["wrapped angles"] += ((np.abs(before[:2]) > 2) & (before[:2] * ours.state[:2] < 0)).sum()
            seen["velocities at a bound"] += (np.abs(ours.state[2:]) == ours.max_velocity).sum()
        ended = stepping[terminated | truncated]
        seeds = next_seed + np.arange(len(ended))
        next_seed += len(ended)
        if len(ended):
            got[ended] = ours.reset(ended, seeds)
            expected[ended] = np.stack([library[i].reset(seed=int(seed))[0] for i, seed in zip(ended, seeds)])
    seen["episodes"] = next_seed - first_seed
    return seen


def side_by_side(overrides: list[str], steps: int, first_seed: int, masked: bool = False, **attributes: Any) -> Counter:
    """SLOTS library envs of the config (`attributes` set on their unwrapped env) against the simulator made of one."""
    cfg = compose_config(["debug=smoke", *overrides]).env
    library = [make_env(cfg) for _ in range(SLOTS)]
    for env in library:
        for name, value in attributes.items():
            setattr(env.unwrapped, name, value)
    simulator = BatchedFrozenLake if cfg.name == "frozenlake" else BatchedAcrobot
    seen = play_side_by_side(library, simulator(library[0], SLOTS), steps, first_seed, masked)
    print(dict(seen))
    return seen


@pytest.mark.parametrize("first_seed", [0, 10_000, 123_456_789])
@pytest.mark.parametrize(
    "overrides,least",
    [
        (["env=frozenlake"], {"time limits": 4, "rewarded": 1}),  # the preset: 4x4, not slippery
        (["env=frozenlake", "env.make_kwargs.is_slippery=true"], {"rewarded": 1}),
        (["env=frozenlake", "env.make_kwargs.map_name=8x8", "env.make_kwargs.is_slippery=true"], {"time limits": 4}),
        (["env=frozenlake", "+env.make_kwargs.desc=[SFFF,FHFH,FFFH,HFSG]"], {"rewarded": 1}),  # two starts
    ],
)
def test_frozenlake_is_bit_identical_to_the_librarys(overrides, least, first_seed):
    seen = side_by_side(overrides, 600, first_seed)
    assert seen["terminations"] >= 50 and all(seen[event] >= count for event, count in least.items())


@pytest.mark.parametrize("first_seed", [0, 10_000, 123_456_789])
def test_acrobot_is_bit_identical_to_the_librarys(first_seed):
    seen = side_by_side(["env=acrobot"], 1_200, first_seed)
    assert seen["terminations"] >= 10 and seen["time limits"] >= 4 and seen["wrapped angles"] >= 100
    assert seen["velocities at a bound"] >= 1


@pytest.mark.parametrize("attributes", [{"book_or_nips": "nips"}, {"dt": 0.05}, {"dt": 1.0}])
def test_acrobot_replays_the_envs_dynamics_and_timestep(attributes):
    seen = side_by_side(["env=acrobot"], 1_200, 7, **attributes)
    assert seen["time limits"] >= 4


@pytest.mark.parametrize("env", ["frozenlake", "acrobot"])
def test_a_step_of_some_slots_leaves_the_others_as_they_are(env):
    slippery = ["env.make_kwargs.map_name=8x8", "env.make_kwargs.is_slippery=true"] if env == "frozenlake" else []
    seen = side_by_side([f"env={env}", *slippery], 1_200, 3, masked=True)
    assert seen["terminations"] >= 10 and seen["time limits"] >= 1


def test_the_preset_builds_its_simulator_and_refuses_what_it_cannot_replay():
    assert type(batched_simulator(compose_config(["env=frozenlake"]).env, 3)) is BatchedFrozenLake
    assert type(batched_simulator(compose_config(["env=acrobot"]).env, 3)) is BatchedAcrobot
    with pytest.raises(ValueError, match=r"replays env.wrappers=\['one_hot'\], not \[\]"):
        batched_simulator(compose_config(["env=frozenlake", "env.wrappers=[]"]).env, 3)
    with pytest.raises(ValueError, match="no batched simulator replays env.id=CartPole-v1"):
        batched_simulator(compose_config(["env=gym", "env.id=CartPole-v1"]).env, 3)
    noisy = make_env(compose_config(["env=acrobot"]).env)
    acrobot: Any = noisy.unwrapped
    acrobot.torque_noise_max = 0.1
    with pytest.raises(ValueError, match=r"replays no torque noise \(torque_noise_max > 0\)"):
        BatchedAcrobot(noisy, 3)


def test_a_step_refuses_actions_that_are_not_one_valid_action_a_slot():
    simulator = batched_simulator(compose_config(["env=acrobot"]).env, 3)
    with pytest.raises(ValueError, match="reset every slot before the first step"):
        simulator.step(np.zeros(3, np.int64))
    simulator.reset(np.arange(3), np.arange(3))
    for actions, message in [
        (np.zeros(4, np.int64), r"step takes 3 integer actions, one a slot, not int64 \(4,\)"),
        (np.zeros(3), r"step takes 3 integer actions, one a slot, not float64 \(3,\)"),
        (np.array([0, 1, 3]), r"actions lie in 0..2, not 0..3"),
    ]:
        with pytest.raises(ValueError, match=message):
            simulator.step(actions)
    for slots, message in [
        (np.array([0, 0]), r"step takes distinct 1-D integer slots, not int64 \(2,\)"),
        (np.array([1.0]), r"step takes distinct 1-D integer slots, not float64 \(1,\)"),
        (np.zeros(0, np.int64), "step takes at least one slot"),
    ]:
        with pytest.raises(ValueError, match=message):
            simulator.step(np.zeros(len(slots), np.int64), slots)
    with pytest.raises(ValueError, match=r"step takes 1 integer actions, one a slot, not int64 \(2,\)"):
        simulator.step(np.zeros(2, np.int64), np.array([2]))
    with pytest.raises(ValueError, match="reset takes 1-D integer slots and seeds of one length"):
        simulator.reset(np.arange(2), np.arange(3))
