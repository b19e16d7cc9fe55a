"""Highway simulator speed: highway-env's highway-v0 against the preset's fast subclass, in one process.

    python benchmarks/highway_speed.py [--steps 1000] [--frequencies 5 15] [--rounds library ours]

Stepping: uniform random actions on the Highway preset's settings (conf/env/highway.yaml; its
physics frequency replaced by each of --frequencies), stock and ours alternating in blocks of 100
steps with the same seeds and actions. The trajectories are identical (tests/envs/test_highway_speed.py),
so both simulate exactly the same scenes. Prints steps/s by wall clock and by this process's CPU
time (the fairer figure on a shared core) and their ratio.
--rounds: also one IIF round of the preset (2,048 records: collect, influence, select, update)
and its evaluation at eval.episodes, on the simulators named, at each frequency (one torch thread).
"""

from __future__ import annotations

import argparse
import functools

import gymnasium as gym
import torch
from round_speed import compose_config  # benchmarks/round_speed.py
from simulator_speed import BLOCK, SIMULATORS, round_and_evaluation, stepping

import rlinfluence.envs.highway  # noqa: F401  (registers highway-v0-fast)

LIBRARY_ID = "highway_env:highway-v0"


def preset(frequency: int, *overrides: str):
    return compose_config(["env=highway", f"env.make_kwargs.config.simulation_frequency={frequency}", *overrides])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000, help=f"per simulator and frequency, in blocks of {BLOCK}")
    parser.add_argument("--frequencies", type=int, nargs="+", default=[5, 15])
    parser.add_argument(
        "--rounds",
        nargs="+",
        choices=SIMULATORS,
        default=[],
        help="also time an IIF round and its evaluation on these simulators",
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    for frequency in args.frequencies:
        cfg = preset(frequency).env
        library, ours = gym.make(LIBRARY_ID, **cfg.make_kwargs), gym.make(cfg.id, **cfg.make_kwargs)
        stepping(f"{frequency} Hz physics", library, ours, args.steps)
    for frequency in args.frequencies if args.rounds else []:
        round_and_evaluation(f"{frequency} Hz physics", functools.partial(preset, frequency), LIBRARY_ID, args.rounds)


if __name__ == "__main__":
    main()
