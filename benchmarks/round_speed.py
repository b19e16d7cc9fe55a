"""Round speed of our PPO and IIF against stock stable-baselines3 PPO, in one process.

    python benchmarks/round_speed.py [--rounds 5] [--envs lunarlander frozenlake]
    python benchmarks/round_speed.py --rounds 1 --envs frozenlake --n-steps 64 --eval-episodes 2   # smoke: seconds
    python benchmarks/round_speed.py --filters [--envs minigrid]   # also the rollout filters' arms (issue 46)
    python benchmarks/round_speed.py --kernels [--envs acrobot]   # pinned kernels against native (issue 56)

Same hyperparameters on both sides (the env's paper settings: 2,048 records, batch 64, 10 epochs,
SGD at the env's lr, max_grad_norm 0.5 as SB3's default, one env, one torch thread). Prints, per env,
seconds per round and steps/s for SB3 PPO, our PPO and our IIF, their ratios, the share of an IIF
round spent in influence scoring, and the time of one evaluation at the paper's 1,000 episodes. With
--filters, the benchmark of rollout filters' arms (random at the env's p and at 25 %, gradient consensus, IIF
and consensus dropping whole episodes) join the same interleaved rounds, each with its ratio to our PPO and IIF:
the leaderboard's seconds come from runs of different sittings, these from one invocation.
With --kernels, only our PPO and IIF, each under the pinned kernels (the CLI's default, src/rlinfluence/kernels.py)
and under the native ones, in a process each (torch chooses its kernels once, when it loads), rounds interleaved:
what the pinning costs, as the ratio pinned/native of wall-clock and of CPU seconds (the latter steadier on a shared
machine). The benchmark itself runs pinned, as the CLI does.
Needs the `bench` extra (stable-baselines3).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from rlinfluence.kernels import NATIVE, PINNED, SETTING, pin_kernels

ENVIRON = dict(os.environ)  # as the benchmark was started: its children pin, or not, from it
pin_kernels()  # before torch loads, as the CLI's entry does: the rounds timed are the rounds the CLI runs

import gymnasium as gym  # noqa: E402
import torch  # noqa: E402
from hydra import compose, initialize_config_dir  # noqa: E402

from rlinfluence.config.paths import CONFIG_DIR  # noqa: E402
from rlinfluence.control.engine import Stack  # noqa: E402
from rlinfluence.control.trainer import Trainer  # noqa: E402
from rlinfluence.kernels import kernels_in_force  # noqa: E402
from rlinfluence.round import run_round  # noqa: E402


def compose_config(overrides: list[str]):
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        return compose("config", overrides=overrides)


class OurRound:
    """One of our rounds (collect + influence + select + update; no evaluation) per call."""

    def __init__(self, env: str, method: list[str], n_steps: int):
        # No round evaluates (eval.every beyond any --rounds): the benchmark times one evaluation on its own.
        cfg = compose_config(
            [
                f"env={env}",
                *method,
                f"env.n_steps={n_steps}",
                "ppo.max_grad_norm=0.5",
                "eval.every=1000000",
                "logger=disabled",
            ]
        )
        self.trainer, self.k = Trainer(cfg), 0

    def __call__(self) -> dict[str, float]:
        self.k += 1
        [row] = run_round(Stack([self.trainer]), self.k)
        return {
            "total": sum(row[f"time_{s}"] for s in ("collect", "influence", "select", "update")),
            "influence": row["time_influence"],
        }


class ServedRound:
    """One of our rounds per call, run by a child process (`--serve`) under the kernels `setting` names."""

    def __init__(self, env: str, method: str, n_steps: int, setting: str):
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--serve", env, method, str(n_steps)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=ENVIRON | {SETTING: setting},
        )
        self.kernels = self.process.stdout.readline().strip()  # the child says which kernels it runs

    def __call__(self) -> dict[str, float]:
        self.process.stdin.write("\n")
        self.process.stdin.flush()
        return json.loads(self.process.stdout.readline())

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait()


def serve(env: str, method: str, n_steps: int) -> None:
    """The child of ServedRound: its kernels' line, then a round's times (JSON) for each line read."""
    torch.set_num_threads(1)
    runner = OurRound(env, [f"method={method}"], n_steps)
    print(kernels_in_force(), flush=True)
    for _ in sys.stdin:
        start = time.process_time()  # CPU seconds: what the kernels cost, whatever else the machine runs
        times = runner()
        print(json.dumps(times | {"cpu": time.process_time() - start}), flush=True)


def kernels_cost(envs: list[str], rounds: int, n_steps: int) -> None:
    """Our PPO and IIF under the pinned and the native kernels, rounds interleaved; the ratio pinned/native."""
    for env in envs:
        runners = {
            f"{method} {setting}": ServedRound(env, method, n_steps, setting)
            for method in ("ppo", "iif")
            for setting in (PINNED, NATIVE)
        }
        times = interleaved(runners, rounds)
        print(f"\n[{env}] {n_steps} records/round, median of {rounds} interleaved rounds, pinned against native")
        for method in ("ppo", "iif"):
            pinned, native = times[f"{method} {PINNED}"], times[f"{method} {NATIVE}"]
            print(
                f"  our {method.upper():<4} pinned {median(pinned):6.3f} s/round, native {median(native):6.3f}: "
                f"ratio {median(pinned) / median(native):4.2f}; CPU seconds {median(pinned, 'cpu'):6.3f} against "
                f"{median(native, 'cpu'):6.3f}: ratio {median(pinned, 'cpu') / median(native, 'cpu'):4.2f}"
            )
        for name, runner in runners.items():
            print(f"  {name:<12} {runner.kernels}")
            runner.close()


class SB3Round:
    """One stock stable-baselines3 PPO rollout + update per call, on the same hyperparameters."""

    def __init__(self, cfg, n_steps: int):
        from stable_baselines3 import PPO

        # The bare env: SB3 one-hot encodes Discrete observations itself.
        sb3_env = gym.make(cfg.env.id, **cfg.env.make_kwargs)
        self.model = PPO(
            "MlpPolicy",
            sb3_env,
            n_steps=n_steps,
            batch_size=64,
            n_epochs=10,
            learning_rate=cfg.env.lr.sgd,
            policy_kwargs={"optimizer_class": torch.optim.SGD},
            device="cpu",
            seed=0,
            verbose=0,
        )
        self.n_steps = n_steps

    def __call__(self) -> dict[str, float]:
        start = time.perf_counter()
        self.model.learn(total_timesteps=self.n_steps, reset_num_timesteps=False)
        return {"total": time.perf_counter() - start}


def interleaved(runners: dict, rounds: int) -> dict[str, list[dict[str, float]]]:
    """Alternate the contenders round by round, so a change in machine load hits them alike."""
    for runner in runners.values():
        runner()  # warm-up: first-call overheads (jvp tracing, allocator, SB3 setup)
    times = {name: [] for name in runners}
    for _ in range(rounds):
        for name, runner in runners.items():
            times[name].append(runner())
    return times


# The rollout filters' arms beyond IIF (conf/experiment/filters.yaml), as the overrides that make each.
FILTER_ARMS = {
    "random": ["method=random"],
    "random 25 %": ["method=random25"],
    "consensus": ["method=consensus"],
    "IIF, episodes": ["method=iif", "method.granularity=episode"],
    "consensus, episodes": ["method=consensus", "method.granularity=episode"],
}


def median(samples: list[dict[str, float]], key: str = "total") -> float:
    return statistics.median(sample[key] for sample in samples)


def evaluation_seconds(env: str, episodes: int) -> tuple[float, float]:
    cfg = compose_config([f"env={env}", f"eval.episodes={episodes}", "method=ppo", "logger=disabled"])
    trainer = Trainer(cfg)
    start = time.perf_counter()
    result = trainer.evaluator.evaluate(trainer.model, 0)
    elapsed = time.perf_counter() - start
    trainer.close()
    return elapsed, result["test_return"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--envs", nargs="+", default=["lunarlander", "frozenlake"])
    parser.add_argument("--eval-episodes", type=int, default=1000)
    parser.add_argument("--n-steps", type=int, default=2048, help="records a round (the paper's 2,048)")
    parser.add_argument("--filters", action="store_true", help="also time the rollout filters' arms")
    parser.add_argument("--kernels", action="store_true", help="only our PPO and IIF, pinned kernels against native")
    parser.add_argument("--serve", nargs=3, metavar=("ENV", "METHOD", "N_STEPS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve[0], args.serve[1], int(args.serve[2]))
        return
    if args.kernels:
        kernels_cost(args.envs, args.rounds, args.n_steps)
        return
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, {args.rounds} timed rounds each")
    for env in args.envs:
        filters = FILTER_ARMS if args.filters else {}
        # SB3's peer is its MlpPolicy on the bare env; a preset with an image network (MiniGrid, DoorKey) has none.
        env_cfg = compose_config([f"env={env}"])
        sb3_peer = env_cfg.env.network.kind == "mlp"
        times = interleaved(
            {
                **({"sb3": SB3Round(env_cfg, args.n_steps)} if sb3_peer else {}),
                "ppo": OurRound(env, ["method=ppo"], args.n_steps),
                "iif": OurRound(env, ["method=iif"], args.n_steps),
                **{name: OurRound(env, overrides, args.n_steps) for name, overrides in filters.items()},
            },
            args.rounds,
        )
        ppo, iif = median(times["ppo"]), median(times["iif"])
        influence = median(times["iif"], "influence")
        eval_time, eval_return = evaluation_seconds(env, args.eval_episodes)
        n = args.n_steps
        print(f"\n[{env}] {n} records/round, median of {args.rounds} interleaved rounds")
        if sb3_peer:
            sb3 = median(times["sb3"])
            print(f"  SB3 PPO    {sb3:6.3f} s/round  {n / sb3:7.0f} steps/s")
            ppo_vs, iif_vs = f"speed-up vs SB3 PPO {sb3 / ppo:4.2f}x", f"speed-up vs SB3 PPO {sb3 / iif:4.2f}x"
        else:
            print("  SB3 PPO    not timed: the preset's image network has no SB3 MlpPolicy peer")
            ppo_vs, iif_vs = "", f"ratio to our PPO {iif / ppo:4.2f}"
        print(f"  our PPO    {ppo:6.3f} s/round  {n / ppo:7.0f} steps/s   {ppo_vs}".rstrip())
        print(f"  our IIF    {iif:6.3f} s/round  {n / iif:7.0f} steps/s   {iif_vs}")
        print(f"  influence  {influence * 1e3:6.1f} ms/round = {influence / iif:5.1%} of an IIF round")
        for name in filters:
            arm = median(times[name])
            print(f"  {name:<20} {arm:6.3f} s/round   ratio to our PPO {arm / ppo:4.2f}, to our IIF {arm / iif:4.2f}")
        print(
            f"  evaluation {eval_time:6.2f} s for {args.eval_episodes} episodes (initial policy, "
            f"mean return {eval_return:.1f})"
        )


if __name__ == "__main__":
    main()
