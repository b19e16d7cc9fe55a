"""Stock SB3 PPO on highway-v0 under whatever highway-env / gymnasium / SB3 this interpreter has.

Measures standard PPO's test-return scale and how fast it plateaus, so that highway-env releases can be
compared (benchmarks/highway_paper_env.md). It imports nothing from rlinfluence unless --env-id names our
simulator, so it runs unchanged in a scratch venv with an old highway-env release.

Settings (docs/settings.md, conf/env/highway.yaml): one env, n_steps 2,048 per round, batch 64, 10 epochs,
SGD lr 5e-3 (plain torch SGD), SB3's other defaults (gamma 0.99, GAE 0.95, clip 0.2, ent 0, vf 0.5,
max_grad_norm 0.5). Test: stochastic policy (deterministic=False), like the authors' test script, on the
authors' constructor (Kinematics, DiscreteMetaAction, vehicles_count given by --eval-vehicles), one fixed
seed list so every round is tested on the same scenes. Round k's test is theta^k (k completed updates).

    OMP_NUM_THREADS=1 python benchmarks/highway_release_probe.py --seed 0 --rounds 20 --out r.csv
    python benchmarks/highway_release_probe.py --rounds 1 --n-steps 64 --eval-episodes 1 --out r.csv   # smoke
"""

from __future__ import annotations

import argparse
import csv
import importlib
import importlib.metadata as md
import sys
import time

import gymnasium as gym
import numpy as np
import torch


def make_env(env_id: str, vehicles: int) -> gym.Env:
    if ":" in env_id:
        importlib.import_module(env_id.split(":")[0])
    else:
        import highway_env  # noqa: F401  (registers highway-v0)
    config = {"observation": {"type": "Kinematics"}, "action": {"type": "DiscreteMetaAction"}}
    if vehicles > 0:  # 0: the release's default vehicles_count (50)
        config["vehicles_count"] = vehicles
    return gym.make(env_id, render_mode=None, config=config)


def test_return(model, env: gym.Env, episodes: int, seed0: int) -> tuple[float, float, float]:
    """Mean and std of the episode return, and the mean episode length, over `episodes` seeded scenes."""
    returns, lengths = [], []
    for i in range(episodes):
        obs, _ = env.reset(seed=seed0 + i)
        done, total, n = False, 0.0, 0
        while not done:
            action, _ = model.predict(obs, deterministic=False)
            obs, reward, terminated, truncated, _ = env.step(int(action))
            total += float(reward)
            n += 1
            done = terminated or truncated
        returns.append(total)
        lengths.append(n)
    return float(np.mean(returns)), float(np.std(returns)), float(np.mean(lengths))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--env-id",
        default="highway-v0",
        help="highway-v0 (the installed release) or e.g. rlinfluence.envs.highway:highway-v0-fast",
    )
    ap.add_argument("--train-vehicles", type=int, default=10, help="vehicles_count when training; 0 = default")
    ap.add_argument("--eval-vehicles", type=int, default=10, help="vehicles_count when testing; 0 = default")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--eval-every", type=int, default=5)
    ap.add_argument("--eval-episodes", type=int, default=20)
    ap.add_argument("--n-steps", type=int, default=2048, help="records a round (the paper's 2,048)")
    ap.add_argument("--out", required=True, help="CSV, one row per tested round, appended as it goes")
    args = ap.parse_args()

    from stable_baselines3 import PPO

    torch.set_num_threads(1)
    versions = {p: md.version(p) for p in ("highway-env", "gymnasium", "stable-baselines3", "torch")}
    train_env = make_env(args.env_id, args.train_vehicles)
    eval_env = make_env(args.env_id, args.eval_vehicles)
    model = PPO(
        "MlpPolicy",
        train_env,
        n_steps=args.n_steps,
        batch_size=64,
        n_epochs=10,
        learning_rate=5e-3,
        policy_kwargs={"optimizer_class": torch.optim.SGD},
        seed=args.seed,
        device="cpu",
        verbose=0,
    )
    eval_seed0 = 10_000 * (args.seed + 1)
    fields = [
        "highway_env",
        "gymnasium",
        "sb3",
        "env_id",
        "train_vehicles",
        "eval_vehicles",
        "seed",
        "round",
        "test_return",
        "test_std",
        "test_len",
        "eval_episodes",
        "train_ep_return",
        "cpu_s",
    ]
    with open(args.out, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        cpu0 = time.process_time()
        for k in range(args.rounds + 1):
            if k % args.eval_every == 0 or k == args.rounds:
                mean, std, length = test_return(model, eval_env, args.eval_episodes, eval_seed0)
                buf = [ep["r"] for ep in model.ep_info_buffer] if k else []
                row = {
                    "highway_env": versions["highway-env"],
                    "gymnasium": versions["gymnasium"],
                    "sb3": versions["stable-baselines3"],
                    "env_id": args.env_id,
                    "train_vehicles": train_env.unwrapped.config["vehicles_count"],
                    "eval_vehicles": eval_env.unwrapped.config["vehicles_count"],
                    "seed": args.seed,
                    "round": k,
                    "test_return": round(mean, 3),
                    "test_std": round(std, 3),
                    "test_len": round(length, 2),
                    "eval_episodes": args.eval_episodes,
                    "train_ep_return": round(float(np.mean(buf)), 3) if buf else "",
                    "cpu_s": round(time.process_time() - cpu0, 1),
                }
                writer.writerow(row)
                fh.flush()
                print(row, flush=True, file=sys.stderr)
            if k < args.rounds:
                model.learn(total_timesteps=args.n_steps, reset_num_timesteps=False)


if __name__ == "__main__":
    main()
