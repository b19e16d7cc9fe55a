"""Whole rounds of N seeds of one config stacked in one process (engine=stacked, src/rlinfluence/control/) against one
seed per process (the arm printed as `alone`: each seed's round on a stack of one), and the floor under both: the
round's env steps.

    python benchmarks/stacked_rounds.py [--envs frozenlake acrobot minigrid lunarlander doorkey] [--seeds 1 4 16]
                                        [--rounds 3] [--method iif] [--n-steps N] [--eval-episodes E]
    python benchmarks/stacked_rounds.py --envs frozenlake minigrid --seeds 1 2 --rounds 1 --n-steps 64 \
        --eval-episodes 2   # smoke: seconds

Each env runs its main settings (conf/env/<env>.yaml: records, network, optimizer, p) and the test episodes of
its committed runs (figures.control_runs.CPU_EVALUATION: 100 on Acrobot, MiniGrid and DoorKey, 50 on LunarLander;
FrozenLake the paper's 1,000). For each N, N seeds (0..N-1) in each arm: one round of all N
(`run_round` on a `Stack` of N Trainers) and N rounds of one (`run_round` on a `Stack` of one, for each of N other
Trainers), interleaved round by round
in one process at one torch thread, round 1 a warm-up (round 0 is only an evaluation), then `--rounds` timed
rounds. CPU seconds (time.process_time): the whole round, and each stage through the rounds' own Stopwatch
(its time_* columns) read on the CPU clock. Printed: seed-rounds per CPU-second of each arm and their ratio, per
stage and for the whole round (the median round).

The floor: the same env steps with uniform random actions and nothing else, per seed: the round's training
steps (env.n_envs x env.n_steps on the envs collection makes) and its test episodes (side by side on
eval.n_parallel envs, as the evaluation steps them), on the library's envs and, where src/rlinfluence/envs/batched.py
has a simulator of the env, on it for all N seeds at once. Printed beside each arm's per-seed round cost as the
ratio cost / floor. An env or setting the stacked engine refuses prints its one-line reason in place of the row.
The last lines are a markdown table for benchmarks/README.md, with the targets: at N = 16, at least 8x the
seed-rounds per CPU-second of the seeds alone (FrozenLake, Acrobot; 4x on MiniGrid), and a per-seed round cost within
1.5x of the floor (LunarLander, DoorKey; the lower floor where the env has a batched simulator).
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import gymnasium as gym
import numpy as np
import torch
from batched_seeds import compose_config, play_batched, play_library
from omegaconf import DictConfig

from rlinfluence.choices import ConfigError
from rlinfluence.config.engines import STACKED, check_engine
from rlinfluence.control.engine import Stack
from rlinfluence.control.trainer import Trainer
from rlinfluence.envs.batched import BatchedSimulator, batched_simulator
from rlinfluence.envs.make import make_env
from rlinfluence.figures.control_runs import CPU_EVALUATION, cpu_eval_episodes
from rlinfluence.round import Stopwatch, run_round
from rlinfluence.run.provenance import describe_code_version
from rlinfluence.run.stacked import seed_configs

ENVS = ["frozenlake", "acrobot", "minigrid", "lunarlander", "doorkey"]
STAGES = {
    "collect": "time_collect",
    "influence": "time_influence",
    "select": "time_select",
    "update": "time_update",
    "evaluate": "time_eval",
}
ROUND = "round"
ARMS = ("alone", "stacked")
# The acceptance targets at N = 16, one thread: the stacked round's seed-rounds per CPU-second over the seeds alone, and
# its per-seed round cost over the floor.
TARGET_N = 16
SPEED_UP_TARGET = {"frozenlake": 8.0, "acrobot": 8.0, "minigrid": 4.0}
FLOOR_TARGET = {"lunarlander": 1.5, "doorkey": 1.5}
ACTION_POOL = 4096  # random actions drawn ahead and cycled, so the floor times the env steps, not the draws


def settings(env: str, method: str, seeds: int, n_steps: int | None, eval_episodes: int | None) -> DictConfig:
    """The env's main settings as engine=stacked runs them for `seeds` seeds (alone, each seed's)."""
    episodes = eval_episodes or (cpu_eval_episodes(env) if env in CPU_EVALUATION else None)
    return compose_config(
        [
            f"env={env}",
            f"method={method}",
            "logger=disabled",
            f"engine={STACKED}",
            f"seeds=[{','.join(map(str, range(seeds)))}]",
            *([f"env.n_steps={n_steps}"] if n_steps else []),
            *([f"eval.episodes={episodes}"] if episodes else []),
        ]
    )


def play_episodes_library(envs: list[gym.Env], episodes: int, actions: np.ndarray) -> None:
    """`episodes` random-action episodes on `envs` side by side, as the evaluation runs them: each env steps in turn,
    starts the next episode when its own ends, and stops when none is left to start."""
    running = list(range(len(envs)))
    for slot in running:
        envs[slot].reset(seed=slot)
    started, t = len(envs), 0
    while running:
        for slot in list(running):
            _, _, terminated, truncated, _ = envs[slot].step(int(actions[t % ACTION_POOL]))
            t += 1
            if terminated or truncated:
                if started < episodes:
                    envs[slot].reset(seed=started)
                    started += 1
                else:
                    running.remove(slot)


def play_episodes_batched(simulator: BatchedSimulator, episodes: int, actions: np.ndarray) -> None:
    """`episodes` random-action episodes on the batched simulator's slots, stepped until that many have ended."""
    simulator.reset(np.arange(simulator.n), np.arange(simulator.n))
    ended, t = 0, 0
    while ended < episodes:
        _, _, terminated, truncated = simulator.step(actions[t % ACTION_POOL])
        t += 1
        done = np.flatnonzero(terminated | truncated)
        if len(done):
            simulator.reset(done, ended + simulator.n + np.arange(len(done)))
            ended += len(done)


class Floor:
    """The round's env steps alone, uniform random actions: one seed's on the library's envs, N seeds' on the batched
    simulator where the env has one (else `batched` is None and `no_batched` says why)."""

    def __init__(self, cfg: DictConfig, n: int):
        env, evaluation = cfg.env, cfg.eval
        self.n, self.episodes = n, evaluation.episodes
        side_by_side = min(evaluation.n_parallel, evaluation.episodes)
        self.train = [make_env(env, collection=True) for _ in range(env.n_envs)]
        self.test = [make_env(env) for _ in range(side_by_side)]
        draw = np.random.default_rng(0)
        n_actions = int(self.test[0].action_space.n)
        self.train_actions = draw.integers(n_actions, size=(env.n_steps, env.n_envs))
        self.test_actions = draw.integers(n_actions, size=ACTION_POOL)
        self.batched: tuple[BatchedSimulator, BatchedSimulator] | None = None
        self.no_batched = ""
        try:
            self.batched = (
                batched_simulator(env, n * env.n_envs, collection=True),
                batched_simulator(env, n * side_by_side),
            )
        except ValueError as error:
            self.no_batched = str(error)
            return
        self.batched_train_actions = draw.integers(n_actions, size=(env.n_steps, n * env.n_envs))
        self.batched_test_actions = draw.integers(n_actions, size=(ACTION_POOL, n * side_by_side))

    def library(self) -> None:
        play_library(self.train, self.train_actions)
        play_episodes_library(self.test, self.episodes, self.test_actions)

    def all_seeds_batched(self) -> None:
        assert self.batched is not None
        train, test = self.batched
        play_batched(train, self.batched_train_actions)
        play_episodes_batched(test, self.n * self.episodes, self.batched_test_actions)

    def close(self) -> None:
        for env in self.train + self.test:
            env.close()


@dataclass
class Measured:
    """CPU seconds of each timed round: per arm, the whole round and each stage, for all N seeds; the floors."""

    rounds: dict[str, dict[str, list[float]]] = field(
        default_factory=lambda: {arm: {name: [] for name in [ROUND, *STAGES]} for arm in ARMS}
    )
    library_floor: list[float] = field(default_factory=list)  # one seed
    batched_floor: list[float] = field(default_factory=list)  # per seed, of N seeds at once
    no_batched: str = ""  # why the env has no batched simulator

    def add(self, arm: str, seconds: float, rows: list[dict]) -> None:
        self.rounds[arm][ROUND].append(seconds)
        for stage, column in STAGES.items():
            self.rounds[arm][stage].append(sum(row[column] for row in rows))  # a stacked row holds its 1/N share

    def seconds(self, arm: str, stage: str) -> float:
        return statistics.median(self.rounds[arm][stage])


def cpu_seconds(work: Callable[[], object]) -> tuple[float, object]:
    start = time.process_time()
    result = work()
    return time.process_time() - start, result


def measure(cfg: DictConfig, n: int, rounds: int) -> Measured:
    """Round 1 of both arms (the warm-up), then `rounds` rounds, each: the stacked round, the N seeds' rounds alone, the
    floors. The Stopwatch reads the CPU clock meanwhile."""
    configs = seed_configs(cfg)
    stacked, alone = [Trainer(c) for c in configs], [Trainer(c) for c in configs]
    floor = Floor(cfg, n)
    measured = Measured(no_batched=floor.no_batched)
    wall_clock = Stopwatch.clock
    Stopwatch.clock = time.process_time
    try:
        for k in range(1, rounds + 2):
            stacked_seconds, stacked_rows = cpu_seconds(lambda k=k: run_round(Stack(stacked), k))
            alone_seconds, alone_rows = cpu_seconds(lambda k=k: [run_round(Stack([t]), k)[0] for t in alone])
            library_seconds, _ = cpu_seconds(floor.library)
            batched_seconds, _ = cpu_seconds(floor.all_seeds_batched) if floor.batched else (float("nan"), None)
            if k == 1:
                continue  # the warm-up
            measured.add("stacked", stacked_seconds, stacked_rows)
            measured.add("alone", alone_seconds, alone_rows)
            measured.library_floor.append(library_seconds)
            measured.batched_floor.append(batched_seconds / n)
    finally:
        Stopwatch.clock = wall_clock
        floor.close()
        for trainer in stacked + alone:
            trainer.close()
    return measured


@dataclass
class Row:
    env: str
    n: int
    refused: str = ""
    measured: Measured | None = None

    def rate(self, arm: str, stage: str) -> float:
        """Seed-rounds per CPU-second."""
        assert self.measured is not None
        return self.n / self.measured.seconds(arm, stage)

    def ratio(self, stage: str) -> float:
        return self.rate("stacked", stage) / self.rate("alone", stage)

    def floors(self) -> tuple[float, float]:
        """Per-seed floor seconds: the library's, the batched simulator's (NaN without one)."""
        assert self.measured is not None
        return statistics.median(self.measured.library_floor), statistics.median(self.measured.batched_floor)

    def over_floor(self, arm: str) -> tuple[float, float]:
        cost = 1 / self.rate(arm, ROUND)
        library, batched = self.floors()
        return cost / library, cost / batched

    def target(self) -> str:
        if self.n != TARGET_N or self.measured is None:
            return "—"
        if self.env in SPEED_UP_TARGET:
            wanted, got = SPEED_UP_TARGET[self.env], self.ratio(ROUND)
            return f"≥ {wanted:g}× alone: {'met' if got >= wanted else 'not met'} ({got:.2f}×)"
        if self.env in FLOOR_TARGET:
            wanted, got = FLOOR_TARGET[self.env], np.nanmax(self.over_floor("stacked"))  # the lower floor
            return f"≤ {wanted:g}× floor: {'met' if got <= wanted else 'not met'} ({got:.2f}×)"
        return "—"


def fmt(value: float, digits: int = 2, unit: str = "") -> str:
    return "—" if np.isnan(value) else f"{value:.{digits}f}{unit}"


def report(row: Row, cfg: DictConfig, rounds: int) -> None:
    print(
        f"\n[{row.env}] N={row.n}  {cfg.env.n_envs * cfg.env.n_steps} records, {cfg.eval.episodes} test episodes, "
        f"method={cfg.method.name}, {cfg.optimizer.name}, {cfg.env.network.kind}; seed-rounds per CPU-second, the "
        f"median of {rounds} timed round(s) after a warm-up"
    )
    if row.refused:
        print(f"  refused: {row.refused}")
        return
    for stage in [*STAGES, ROUND]:
        print(
            f"  {stage:<10} alone {fmt(row.rate('alone', stage)):>9}  stacked {fmt(row.rate('stacked', stage)):>9}  "
            f"ratio {fmt(row.ratio(stage))}x"
        )
    assert row.measured is not None
    no_batched = row.measured.no_batched
    library, batched = row.floors()
    print(
        f"  floor      env steps alone, CPU seconds per seed: library {fmt(library, 4)} s"
        + (f"; {no_batched}" if no_batched else f", batched {fmt(batched, 4)} s")
    )
    for arm in ARMS:
        over_library, over_batched = row.over_floor(arm)
        print(
            f"  {arm:<10} per-seed round cost {1 / row.rate(arm, ROUND):.4f} s = {fmt(over_library)}x the library "
            f"floor" + ("" if no_batched else f", {fmt(over_batched)}x the batched floor")
        )
    print(f"  target     {row.target()}")


TABLE_COLUMNS = [
    "env",
    "N",
    "round: alone → stacked",
    *[f"{stage} ratio" for stage in STAGES],
    "floor s/seed: library / batched",
    "stacked round / floor: library / batched",
    "target (N = 16)",
]


def table(rows: list[Row]) -> None:
    """The markdown table for benchmarks/README.md."""
    print("\n" + "| " + " | ".join(TABLE_COLUMNS) + " |")
    print("|" + "---|" * len(TABLE_COLUMNS))
    for row in rows:
        if row.refused:
            cells = [row.env, str(row.n), f"refused: {row.refused}", *["—"] * (len(TABLE_COLUMNS) - 3)]
        else:
            library, batched = row.floors()
            over_library, over_batched = row.over_floor("stacked")
            cells = [
                row.env,
                str(row.n),
                f"{fmt(row.rate('alone', ROUND))} → {fmt(row.rate('stacked', ROUND))} ({fmt(row.ratio(ROUND))}×)",
                *[fmt(row.ratio(stage), unit="×") for stage in STAGES],
                f"{fmt(library, 4)} / {fmt(batched, 4)}",
                f"{fmt(over_library, unit='×')} / {fmt(over_batched, unit='×')}",
                row.target(),
            ]
        print("| " + " | ".join(cells) + " |")


def cpu_model() -> str:
    """The CPU's model name, family and model (Linux's /proc/cpuinfo; elsewhere what `platform` knows)."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            fields = dict(line.split(":", 1) for line in cpuinfo.read().split("\n\n")[0].splitlines() if ":" in line)
    except OSError:
        return platform.processor() or platform.machine()
    fields = {key.strip(): value.strip() for key, value in fields.items()}
    return f"{fields.get('model name', '?')} (family {fields.get('cpu family', '?')} model {fields.get('model', '?')})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=ENVS)
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 4, 16], help="N, the seeds of each arm")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds, after one warm-up round")
    parser.add_argument("--method", default="iif", help="method= of both arms (iif: every stage runs)")
    parser.add_argument("--n-steps", type=int, help="env.n_steps (default: the env's)")
    parser.add_argument("--eval-episodes", type=int, help="eval.episodes (default: the committed runs')")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"command: python {shlex.join(sys.argv)}")
    print(
        f"machine: {cpu_model()}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; torch "
        f"{torch.__version__}, {torch.get_num_threads()} thread; code {describe_code_version()}"
    )
    rows = []
    for env in args.envs:
        for n in args.seeds:
            cfg = settings(env, args.method, n, args.n_steps, args.eval_episodes)
            try:
                check_engine(cfg)
            except ConfigError as refusal:
                row = Row(env, n, refused=str(refusal))
            else:
                row = Row(env, n, measured=measure(cfg, n, args.rounds))
            report(row, cfg, args.rounds)
            rows.append(row)
    table(rows)


if __name__ == "__main__":
    main()
