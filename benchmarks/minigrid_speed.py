"""MiniGrid simulator speed: the library's Empty-8x8 against the preset's (views looked up per pose,
src/rlinfluence/envs/minigrid_view.py), in one process.

    python benchmarks/minigrid_speed.py [--steps 5000] [--rounds library ours]

Stepping: uniform random actions, both simulators alternating in blocks of 100 steps with the same
seeds and actions (the trajectories are identical: tests/envs/test_envs.py). Prints steps/s by wall clock
and by this process's CPU time and their ratio.
--rounds: also one IIF round of the MiniGrid preset (2,048 records: collect, influence, select,
update) and its evaluation at --episodes, on the simulators named (one torch thread).
"""

from __future__ import annotations

import argparse

import gymnasium as gym
import torch
from round_speed import compose_config  # benchmarks/round_speed.py
from simulator_speed import BLOCK, SIMULATORS, round_and_evaluation, stepping

import rlinfluence.envs.minigrid_view  # noqa: F401  (registers the -fast ids)

LIBRARY_ID = "minigrid:MiniGrid-Empty-8x8-v0"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5000, help=f"per simulator, in blocks of {BLOCK}")
    parser.add_argument(
        "--rounds",
        nargs="+",
        choices=SIMULATORS,
        default=[],
        help="also time an IIF round and its evaluation on these simulators",
    )
    parser.add_argument("--episodes", type=int, default=100, help="evaluation episodes of the timed round")
    args = parser.parse_args()
    torch.set_num_threads(1)

    def preset(*overrides: str):
        return compose_config(["env=minigrid", f"eval.episodes={args.episodes}", *overrides])

    stepping("MiniGrid-Empty-8x8", gym.make(LIBRARY_ID), gym.make(preset().env.id), args.steps)
    if args.rounds:
        round_and_evaluation("MiniGrid-Empty-8x8", preset, LIBRARY_ID, args.rounds)


if __name__ == "__main__":
    main()
