"""How much memory one more seed of a stack takes, to say how many seeds one device's memory holds.

    python benchmarks/stack_memory.py [--envs frozenlake acrobot minigrid lunarlander doorkey] [--seeds 1 16]
                                      [--rounds 2] [--n-steps N] [--eval-episodes E]
    python benchmarks/stack_memory.py --envs frozenlake --seeds 1 2 --rounds 1 --n-steps 64 --eval-episodes 2  # smoke

Each (env, N) runs in a fresh process: N seeds of the env's main settings (as benchmarks/stacked_rounds.py's,
method=iif, so every stage runs) trained together for `--rounds` rounds, then that process's peak resident memory
(getrusage's ru_maxrss). A seed's share is the slope between the smallest and the largest N, which cancels what any
process holds (the interpreter, torch, the code). Host memory counts everything a seed holds: its tensors (the
stack's parameters and optimizer state, the round's records, the activations of the influence pass and the update,
which on a GPU live on the device) and what stays on the host in any case (its envs, their episodes' actions, the
rollout's numpy grids). So the slope bounds a seed's device memory from above: a device of M GiB holds at least
M / slope seeds. It says nothing of the speed there: the seeds' envs step on the host's cores either way.
"""

from __future__ import annotations

import argparse
import resource
import shlex
import subprocess
import sys

import torch
from stacked_rounds import ENVS, cpu_model, settings

from rlinfluence.control.engine import Stack
from rlinfluence.control.trainer import Trainer
from rlinfluence.round import run_round
from rlinfluence.run.stacked import seed_configs

GIB = 2**30
DEVICE_GIB = (78, 139)  # an H100's and an H200's memory as torch reports it


def peak_after_rounds(env: str, n: int, rounds: int, n_steps: int | None, eval_episodes: int | None) -> int:
    """This process's peak resident bytes after `rounds` rounds of N seeds of `env` in one stack."""
    torch.set_num_threads(1)
    trainers = [Trainer(cfg) for cfg in seed_configs(settings(env, "iif", n, n_steps, eval_episodes))]
    for k in range(rounds + 1):  # round 0 is the initial evaluation
        run_round(Stack(trainers), k)
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def measured_peak(env: str, n: int, args: argparse.Namespace) -> int:
    """peak_after_rounds in a fresh process, so no other N's memory counts."""
    settings_given = [str(value) for value in (args.rounds, args.n_steps, args.eval_episodes)]
    child = [sys.executable, __file__, "--child", env, str(n), *settings_given]
    return int(subprocess.run(child, check=True, capture_output=True, text=True).stdout.split()[-1])


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        env, n, rounds, n_steps, eval_episodes = sys.argv[2:7]
        optional = [None if value == "None" else int(value) for value in (n_steps, eval_episodes)]
        print(peak_after_rounds(env, int(n), int(rounds), *optional))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=ENVS)
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 16], help="N: at least two values")
    parser.add_argument("--rounds", type=int, default=2, help="rounds after the initial evaluation")
    parser.add_argument("--n-steps", type=int, help="env.n_steps (default: the env's)")
    parser.add_argument("--eval-episodes", type=int, help="eval.episodes (default: the committed runs')")
    args = parser.parse_args()
    if len(set(args.seeds)) < 2:
        parser.error(f"--seeds {args.seeds}: the slope needs two different N")
    print(f"command: python {shlex.join(sys.argv)}")
    print(f"machine: {cpu_model()}; torch {torch.__version__}, one thread")
    print("\n| env | peak MiB at each N | per seed (slope) | seeds a 78 / 139 GiB device holds at least |")
    print("|---|---|---|---|")
    low, high = min(args.seeds), max(args.seeds)
    for env in args.envs:
        peaks = {n: measured_peak(env, n, args) for n in sorted(set(args.seeds))}
        per_seed = (peaks[high] - peaks[low]) / (high - low)
        at_each = ", ".join(f"N = {n}: {peak / 2**20:.0f}" for n, peak in peaks.items())
        # A share below the resolution (tiny settings: the peak is the imports') bounds nothing.
        holds = " / ".join(f"{int(gib * GIB / per_seed):,}" for gib in DEVICE_GIB) if per_seed > 0 else "— (no slope)"
        print(f"| {env} | {at_each} | {per_seed / 2**20:.1f} MiB | {holds} |")


if __name__ == "__main__":
    main()
