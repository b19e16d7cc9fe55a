"""Stock stable-baselines3 PPO against the same PPO with IIF dropped in, on FrozenLake at the paper's settings.

    python benchmarks/sb3_iif_frozenlake.py [--seeds 0 1 2 3 4] [--rounds 50] [--eval-episodes 100] [--out runs.csv]

FrozenLake-v1 4×4, not slippery (SB3 one-hot encodes its states); 2,048 records a round, batch 64,
10 epochs, SGD 5e-3, IIF p = 50 % on f_return (conf/env/frozenlake.yaml); SB3's defaults otherwise
(64×64 tanh MLP, γ 0.99, λ 0.95, clip 0.2, max_grad_norm 0.5). After every round, the test return is the
mean over `--eval-episodes` episodes of the stochastic policy. Prints per arm the mean over seeds of the
final test return and of the mean test return over rounds (SE_ave's quantity), and how many seeds
reached a test return of 1. Needs the `sb3` extra.
"""

from __future__ import annotations

import argparse
import csv

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.monitor import Monitor

from rlinfluence.sb3 import IIFRolloutBuffer, InfluenceFilter

N_STEPS = 2048


def make_env() -> gym.Env:
    return gym.make("FrozenLake-v1", map_name="4x4", is_slippery=False)


def test_returns(seed: int, iif: bool, rounds: int, eval_episodes: int) -> list[float]:
    """The test return after each round of one run."""
    buffer = {"rollout_buffer_class": IIFRolloutBuffer} if iif else {}
    model = PPO(
        "MlpPolicy",
        make_env(),
        n_steps=N_STEPS,
        batch_size=64,
        n_epochs=10,
        learning_rate=5e-3,
        policy_kwargs={"optimizer_class": torch.optim.SGD},
        seed=seed,
        **buffer,
    )
    callback = InfluenceFilter(mode="iif", p=50) if iif else None
    eval_env = Monitor(make_env())  # evaluate_policy reads episode returns from it
    eval_env.reset(seed=10_000 + seed)
    returns = []
    for _ in range(rounds):
        model.learn(N_STEPS, callback=callback, reset_num_timesteps=False)
        mean, _ = evaluate_policy(model, eval_env, n_eval_episodes=eval_episodes, deterministic=False)
        returns.append(float(mean))
    return returns


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--eval-episodes", type=int, default=100)
    parser.add_argument("--out", help="also write one row per (arm, seed, round) to this CSV")
    args = parser.parse_args()
    torch.set_num_threads(1)
    curves = {}
    for seed in args.seeds:
        for arm in ("stock SB3 PPO", "SB3 + IIF"):
            curves[arm, seed] = test_returns(seed, arm == "SB3 + IIF", args.rounds, args.eval_episodes)
            returns = curves[arm, seed]
            print(f"seed {seed} {arm}: final {returns[-1]:.3f}, mean over rounds {np.mean(returns):.3f}", flush=True)
    for arm in ("stock SB3 PPO", "SB3 + IIF"):
        runs = np.array([curves[arm, seed] for seed in args.seeds])
        print(
            f"{arm:14s} final test return {runs[:, -1].mean():.3f}, mean over rounds {runs.mean():.3f}, "
            f"seeds reaching 1: {int((runs.max(axis=1) >= 1).sum())}/{len(args.seeds)} "
            f"(per seed final: {runs[:, -1].round(2).tolist()})"
        )
    if args.out:
        with open(args.out, "w", newline="") as out:
            writer = csv.writer(out)
            writer.writerow(["arm", "seed", "round", "test_return"])
            for (arm, seed), returns in curves.items():
                writer.writerows((arm, seed, k, value) for k, value in enumerate(returns, start=1))


if __name__ == "__main__":
    main()
