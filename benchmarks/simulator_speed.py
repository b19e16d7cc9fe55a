"""The library's simulator against ours, in one process: what benchmarks/highway_speed.py and
benchmarks/minigrid_speed.py share. Both simulators get the same seeds and uniform random actions,
alternating in blocks, so a change in machine load hits both alike; the trajectories are identical
(tests/envs/test_highway_speed.py, tests/envs/test_envs.py), so both simulate exactly the same episodes."""

from __future__ import annotations

import time
from collections.abc import Callable

import gymnasium as gym
import numpy as np
from omegaconf import DictConfig

from rlinfluence.control.engine import Stack
from rlinfluence.control.trainer import Trainer
from rlinfluence.round import run_round

SIMULATORS = ["library", "ours"]
BLOCK = 100


def play(env: gym.Env, seed: int, steps: int) -> tuple[float, float]:
    """Wall and CPU seconds for `steps` random-action steps from reset(seed), resetting on episode ends."""
    actions = np.random.default_rng(seed).integers(env.action_space.n, size=steps)
    episode = seed * steps
    env.reset(seed=episode)
    wall, cpu = time.perf_counter(), time.process_time()
    for action in actions:
        _, _, terminated, truncated, _ = env.step(int(action))
        if terminated or truncated:
            episode += 1
            env.reset(seed=episode)
    return time.perf_counter() - wall, time.process_time() - cpu


def stepping(title: str, library: gym.Env, ours: gym.Env, steps: int) -> None:
    """Steps/s of both by wall clock and by this process's CPU time (the fairer figure on a shared core)."""
    envs = dict(zip(SIMULATORS, (library, ours)))
    seconds = {name: np.zeros(2) for name in envs}
    for block in range(steps // BLOCK):
        for name, env in envs.items():
            seconds[name] += play(env, block, BLOCK)
    print(f"\n[{title}] {steps} random-action steps each")
    for name, (wall, cpu) in seconds.items():
        print(f"  {name:8s} {steps / wall:9.1f} steps/s wall   {steps / cpu:9.1f} steps per CPU-second")
    (library_wall, library_cpu), (our_wall, our_cpu) = seconds["library"], seconds["ours"]
    print(f"  speed-up {library_wall / our_wall:9.2f}x wall            {library_cpu / our_cpu:9.2f}x CPU")


def round_and_evaluation(title: str, preset: Callable[..., DictConfig], library_id: str, simulators: list[str]) -> None:
    """One IIF round (collect, influence, select, update) of `preset(*overrides)` and its evaluation, on each
    simulator named: ours is the preset's env id, the library's is `library_id` in its place."""
    print(f"\n[{title}] one IIF round of the preset and its evaluation")
    for name in simulators:
        env_id = [f"env.id={library_id}"] if name == "library" else []
        trainer = Trainer(preset("method=iif", "logger=disabled", "progress=false", *env_id))
        cpu = time.process_time()
        [row] = run_round(Stack([trainer]), 1)
        cpu = time.process_time() - cpu
        trainer.close()
        training = sum(row[f"time_{part}"] for part in ("collect", "influence", "select", "update"))
        print(
            f"  {name:8s} round {training:6.1f} s (collect {row['time_collect']:5.1f} s)   "
            f"evaluation {row['time_eval']:6.1f} s for {row['eval_episodes']} episodes   "
            f"total {training + row['time_eval']:6.1f} s wall, {cpu:6.1f} CPU-seconds"
        )
