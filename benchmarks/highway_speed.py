"""Highway simulator speed: highway-env's highway-v0 against the preset's fast subclass, in one process.

    python benchmarks/highway_speed.py [--steps 1000] [--frequencies 5 15] [--rounds highway-env ours]

Stepping: uniform random actions on the Highway preset's settings (conf/env/highway.yaml; its
physics frequency replaced by each of --frequencies), stock and ours alternating in blocks of 100
steps with the same seeds and actions. The trajectories are identical (tests/test_highway_speed.py),
so both simulate exactly the same scenes. Prints steps/s by wall clock and by this process's CPU
time (the fairer figure on a shared core) and their ratio.
--rounds: also one IIF round of the preset (2,048 records: collect, influence, select, update)
and its evaluation at eval.episodes, on the simulators named, at each frequency (one torch thread).
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
SIMULATORS = ["highway-env", "ours"]
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
    envs = dict(zip(SIMULATORS, (gym.make(STOCK_ID, **cfg.make_kwargs), gym.make(cfg.id, **cfg.make_kwargs))))
    seconds = {name: np.zeros(2) for name in envs}
    for block in range(steps // BLOCK):  # alternate, so that a change in machine load hits both alike
        for name, env in envs.items():
            seconds[name] += play(env, block, BLOCK)
    print(f"\n[{frequency} Hz physics] {steps} random-action steps each, the preset's other settings")
    for name, (wall, cpu) in seconds.items():
        print(f"  {name:12s} {steps / wall:7.1f} steps/s wall   {steps / cpu:7.1f} steps per CPU-second")
    (stock_wall, stock_cpu), (our_wall, our_cpu) = seconds["highway-env"], seconds["ours"]
    print(f"  speed-up    {stock_wall / our_wall:7.2f}x wall            {stock_cpu / our_cpu:7.2f}x CPU")


def round_and_evaluation(frequency: int, simulators: list[str]) -> None:
    print(f"\n[{frequency} Hz physics] one IIF round of the preset and its evaluation")
    for name in simulators:
        overrides = ["method=iif", "logger=disabled", "progress=false"]
        if name == "highway-env":
            overrides.append(f"env.id={STOCK_ID}")
        trainer = Trainer(preset(frequency, *overrides))
        cpu = time.process_time()
        row = trainer.run_round(1)
        cpu = time.process_time() - cpu
        trainer.close()
        training = sum(row[f"time_{part}"] for part in ("collect", "influence", "select", "update"))
        print(f"  {name:12s} round {training:6.1f} s (collect {row['time_collect']:5.1f} s)   "
              f"evaluation {row['time_eval']:6.1f} s for {row['eval_episodes']} episodes   "
              f"total {training + row['time_eval']:6.1f} s wall, {cpu:6.1f} CPU-seconds")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000, help=f"per simulator and frequency, in blocks of {BLOCK}")
    parser.add_argument("--frequencies", type=int, nargs="+", default=[5, 15])
    parser.add_argument("--rounds", nargs="+", choices=SIMULATORS, default=[],
                        help="also time a training round and its evaluation on these simulators")
    args = parser.parse_args()
    torch.set_num_threads(1)
    for frequency in args.frequencies:
        stepping(frequency, args.steps)
    for frequency in args.frequencies if args.rounds else []:
        round_and_evaluation(frequency, args.rounds)


if __name__ == "__main__":
    main()
