"""Highway simulator speed: highway-env's highway-v0 against the preset's fast subclass, in one process.

    python benchmarks/highway_speed.py [--steps 1000] [--frequencies 5 15] [--rounds]

Stepping: uniform random actions on the Highway preset's settings (conf/env/highway.yaml; its
physics frequency replaced by each of --frequencies), stock and ours alternating in blocks of 100
steps with the same seeds and actions. The trajectories are identical (tests/test_highway_speed.py),
so both simulate exactly the same scenes. Prints steps/s by wall clock and by this process's CPU
time (the fairer figure on a shared core) and their ratio.
--rounds: also one IIF round of the preset (2,048 records: collect, influence, select, update)
and its evaluation at eval.episodes, on each simulator at each frequency (one torch thread).
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np
import torch
from round_speed import compose_config  # benchmarks/round_speed.py

import rlinfluence.highway  # noqa: F401  (registers highway-v0-fast)
from rlinfluence.round import Trainer

STOCK_ID = "highway_env:highway-v0"
BLOCK = 100


def preset(frequency: int, *overrides: str):
    return compose_config(["env=highway", f"env.make_kwargs.config.simulation_frequency={frequency}",
                           *overrides])


def play(env: gym.Env, seed: int, steps: int) -> tuple[float, float]:
    """Wall and CPU seconds for `steps` random-action steps from reset(seed), resetting on episode ends."""
    actions = np.random.default_rng(seed).integers(5, size=steps)
    episode = seed * steps
    env.reset(seed=episode)
    wall, cpu = time.perf_counter(), time.process_time()
    for action in actions:
        _, _, terminated, truncated, _ = env.step(int(action))
        if terminated or truncated:
            episode += 1
            env.reset(seed=episode)
    return time.perf_counter() - wall, time.process_time() - cpu


def stepping(frequency: int, steps: int) -> None:
    cfg = preset(frequency).env
    envs = {"highway-env": gym.make(STOCK_ID, **cfg.make_kwargs), "ours": gym.make(cfg.id, **cfg.make_kwargs)}
    seconds = {name: np.zeros(2) for name in envs}
    for block in range(steps // BLOCK):  # alternate, so that a change in machine load hits both alike
        for name, env in envs.items():
            seconds[name] += play(env, block, BLOCK)
    print(f"\n[{frequency} Hz physics] {steps} random-action steps each, the preset's other settings")
    for name, (wall, cpu) in seconds.items():
        print(f"  {name:12s} {steps / wall:7.1f} steps/s wall   {steps / cpu:7.1f} steps per CPU-second")
    (stock_wall, stock_cpu), (our_wall, our_cpu) = seconds["highway-env"], seconds["ours"]
    print(f"  speed-up    {stock_wall / our_wall:7.2f}x wall            {stock_cpu / our_cpu:7.2f}x CPU")


def round_and_evaluation(frequency: int) -> None:
    print(f"\n[{frequency} Hz physics] one IIF round of the preset and its evaluation")
    for name, env_id in (("highway-env", STOCK_ID), ("ours", None)):
        overrides = ["method=iif", "logger=disabled", "progress=false"] + ([f"env.id={env_id}"] if env_id else [])
        trainer = Trainer(preset(frequency, *overrides))
        row = trainer.run_round(1)
        trainer.close()
        training = sum(row[f"time_{part}"] for part in ("collect", "influence", "select", "update"))
        print(f"  {name:12s} round {training:6.1f} s (collect {row['time_collect']:5.1f} s)   "
              f"evaluation {row['time_eval']:6.1f} s for {row['eval_episodes']} episodes   "
              f"total {training + row['time_eval']:6.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000, help=f"per simulator and frequency, in blocks of {BLOCK}")
    parser.add_argument("--frequencies", type=int, nargs="+", default=[5, 15])
    parser.add_argument("--rounds", action="store_true", help="also time a training round and its evaluation")
    args = parser.parse_args()
    torch.set_num_threads(1)
    for frequency in args.frequencies:
        stepping(frequency, args.steps)
    if args.rounds:
        for frequency in args.frequencies:
            round_and_evaluation(frequency)


if __name__ == "__main__":
    main()
