"""The Highway preset's faster simulator (src/rlinfluence/envs/highway.py) against highway-env's own
highway-v0, side by side in one process: the same seeds and random actions must give bit-identical
observations, rewards, terminations, truncations, reward terms and the full state of every vehicle
on the road, through crashes, lane changes and time limits. Its speed: benchmarks/highway_speed.py."""

from __future__ import annotations

from collections import Counter

import gymnasium as gym
import numpy as np
import pytest
from highway_env.envs.common.abstract import AbstractEnv

from conftest import compose_config
from rlinfluence.envs.highway import FastIDMVehicle, FastMDPVehicle, FastRoad, NumpyKinematics
from rlinfluence.envs.make import chosen_make_kwargs, make_env


def simulator(env: gym.Env) -> AbstractEnv:
    """The highway-env env below the wrappers (its road, vehicles and config: highway-env ships no types)."""
    unwrapped = env.unwrapped
    assert isinstance(unwrapped, AbstractEnv)
    return unwrapped


def road_state(env: gym.Env) -> list[tuple]:
    """Everything that evolves for each vehicle, in the road's order (the ego has no IDM timer)."""
    return [
        (
            v.position.tolist(),
            v.heading,
            v.speed,
            v.lane_index,
            v.target_lane_index,
            v.target_speed,
            v.crashed,
            v.action,
            getattr(v, "timer", None),
        )
        for v in simulator(env).road.vehicles
    ]


def play_side_by_side(frequency: int, steps: int, first_episode: int, vehicles: int = 10) -> Counter:
    """Step stock and ours with the same seeds (first_episode, first_episode + 1, ...) and uniform random
    actions; assert identity at every step; return what the trajectories went through. Other than the
    preset's 10 `vehicles`: the collection env of env.train_make_kwargs.config.vehicles_count (issue 42)."""
    traffic = [] if vehicles == 10 else [f"+env.train_make_kwargs.config.vehicles_count={vehicles}"]
    cfg = compose_config(["env=highway", f"env.make_kwargs.config.simulation_frequency={frequency}", *traffic]).env
    stock = gym.make("highway_env:highway-v0", **dict(chosen_make_kwargs(cfg, collection=True)))
    ours = make_env(cfg, collection=True)
    assert simulator(ours).config["vehicles_count"] == vehicles
    rng = np.random.default_rng([frequency, first_episode])
    seen: Counter[str] = Counter()
    episode, done = first_episode, True
    for _ in range(steps):
        if done:
            expected, _ = stock.reset(seed=episode)
            got, _ = ours.reset(seed=episode)
            episode += 1
            ego_lane = simulator(stock).vehicle.lane_index
            assert np.array_equal(got, expected) and got.dtype == expected.dtype
        others_before = [(v.target_lane_index, v.crashed) for v in simulator(stock).road.vehicles[1:]]
        action = int(rng.integers(5))
        expected, reward, terminated, truncated, info = stock.step(action)
        got, our_reward, our_terminated, our_truncated, our_info = ours.step(action)
        assert np.array_equal(got, expected) and got.dtype == expected.dtype
        assert (our_reward, our_terminated, our_truncated) == (reward, terminated, truncated)
        assert our_info["rewards"] == info["rewards"] and our_info["crashed"] == info["crashed"]
        assert road_state(ours) == road_state(stock)
        seen["steps"] += 1
        seen["crashes"] += terminated
        seen["time limits"] += truncated and not terminated
        seen["ego lane changes"] += simulator(stock).vehicle.lane_index != ego_lane
        ego_lane = simulator(stock).vehicle.lane_index
        for (target_before, crashed_before), v in zip(others_before, simulator(stock).road.vehicles[1:]):
            seen["other vehicles' lane changes"] += v.target_lane_index != target_before
            seen["other vehicles' crashes"] += v.crashed and not crashed_before
        done = terminated or truncated
    seen["episodes"] = episode - first_episode
    return seen


def test_the_preset_runs_on_the_fast_simulator():
    env = simulator(make_env(compose_config(["env=highway"]).env))
    assert type(env.road) is FastRoad and type(env.observation_type) is NumpyKinematics
    assert type(env.vehicle) is FastMDPVehicle
    assert {type(v) for v in env.road.vehicles[1:]} == {FastIDMVehicle}


# 10,000 steps at the preset's 5 Hz in four parts of 2,500 on distinct episodes (parallel runs can
# take them apart), 1,000 at the paper's 15 Hz, and 1,000 in highway-v0's default traffic of 50 vehicles
# (issue 42's standard arm collects there; a step costs about 5 times a 10-vehicle one): several minutes
# of stock highway-env, so opt-in (`pytest -m long tests/envs/test_highway_speed.py`); the first part is quick
# enough for every run.
@pytest.mark.parametrize(
    "frequency,steps,first_episode,vehicles",
    [
        (5, 600, 0, 10),
        *[pytest.param(5, 2_500, 10_000 * part, 10, marks=pytest.mark.long) for part in range(4)],
        pytest.param(15, 1_000, 0, 10, marks=pytest.mark.long),
        pytest.param(5, 1_000, 0, 50, marks=pytest.mark.long),
    ],
)
def test_trajectories_are_bit_identical_to_highway_envs(frequency, steps, first_episode, vehicles):
    seen = play_side_by_side(frequency, steps, first_episode, vehicles)
    print(dict(seen))
    # what the comparison went through, so that identity is not that of uneventful drives
    assert seen["crashes"] >= steps / 100 and seen["time limits"] >= 1
    assert seen["ego lane changes"] >= steps / 20 and seen["other vehicles' lane changes"] >= steps / 100
