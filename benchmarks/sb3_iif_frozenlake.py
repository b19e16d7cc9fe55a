"""Stock stable-baselines3 PPO against the same PPO with IIF dropped in, on FrozenLake at the paper's settings.

    python benchmarks/sb3_iif_frozenlake.py [--seeds 0 1 2 3 4] [--rounds 50] [--eval-episodes 100] [--out CSV]

FrozenLake-v1 4×4, not slippery (SB3 one-hot encodes its states); 2,048 records a round, batch 64,
10 epochs, SGD 5e-3, IIF p = 50 % on f_return (conf/env/frozenlake.yaml); SB3's defaults otherwise
(64×64 tanh MLP, γ 0.99, λ 0.95, clip 0.2, max_grad_norm 0.5). The initial policy and the policy after
every round are tested: the test return is the mean over `--eval-episodes` episodes of the stochastic
policy. Prints per arm the mean over seeds of the final test return and of the mean test return over
rounds (SE_ave's quantity), and how many seeds reached a test return of 1. Needs the `sb3` extra.

Writes the runs as tidy rows (figures/runs.py) to paper_figures/data/sb3.csv (`--out`): experiment `sb3`,
protocol `sb3`, arms `ppo` and `iif-p50`, round k = the test after k updates (round 0 = the initial
policy), and names what made them in settings.json under their config_hash. Rows of (env, arm, seed)
run now replace those in the CSV; others are kept (as benchmarks/authors_pipeline/convert.py does).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from importlib import metadata
from pathlib import Path

import gymnasium as gym
import numpy as np
import pandas as pd
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.monitor import Monitor

from rlinfluence.config.paths import REPO_ROOT
from rlinfluence.figures.runs import EXTERNAL_RUN_KEY, TIDY_COLUMNS, commit_external_runs
from rlinfluence.run.provenance import provenance
from rlinfluence.sb3 import IIFRolloutBuffer, InfluenceFilter

N_STEPS = 2048
P = 50.0
SB3_CSV = REPO_ROOT / "paper_figures" / "data" / "sb3.csv"
EXTRA_COLUMNS = ["test_episodes"]


def make_env() -> gym.Env:
    return gym.make("FrozenLake-v1", map_name="4x4", is_slippery=False)


def test_returns(seed: int, iif: bool, rounds: int, eval_episodes: int) -> list[dict]:
    """One row per test of one run: the initial policy's (round 0), then the policy's after each round."""
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
    rows = []
    for k in range(rounds + 1):
        row: dict = {"round": k, "env_steps": k * N_STEPS, "n_records": N_STEPS if k else 0, "n_kept": 0}
        if k:
            start = time.perf_counter()
            model.learn(N_STEPS, callback=callback, reset_num_timesteps=False)
            kept = getattr(model.rollout_buffer, "kept_ids", None)
            row["n_kept"] = N_STEPS if kept is None else len(kept)
            row["time_update"] = time.perf_counter() - start  # collection, influence and update together
        start = time.perf_counter()
        mean, _ = evaluate_policy(model, eval_env, n_eval_episodes=eval_episodes, deterministic=False)
        rows.append({**row, "test_return": float(mean), "time_eval": time.perf_counter() - start})
    return rows


def settings(rounds: int, eval_episodes: int) -> dict:
    """What made the rows; hashed into their config_hash."""
    return {
        "script": "benchmarks/sb3_iif_frozenlake.py",
        "stable-baselines3": metadata.version("stable-baselines3"),
        "env_id": "FrozenLake-v1 (4x4, is_slippery=False)",
        "n_steps": N_STEPS,
        "batch_size": 64,
        "n_epochs": 10,
        "learning_rate": 5e-3,
        "optimizer": "sgd",
        "p": P,
        "mode": "iif",
        "rounds": rounds,
        "test_episodes": eval_episodes,
        "deterministic_test": False,
    }


def settings_hash(known: dict) -> str:
    return hashlib.sha256(json.dumps(known, sort_keys=True).encode()).hexdigest()[:6]


def tidy(rows: list[dict], seed: int, iif: bool, config_hash: str, eval_episodes: int, made_by: dict) -> pd.DataFrame:

    frame = pd.DataFrame(rows).assign(
        experiment="sb3",
        env="frozenlake",
        method="iif" if iif else "ppo",
        method_tag=f"iif-p{P:g}" if iif else "ppo",
        p=P if iif else float("nan"),
        optimizer="sgd",
        protocol="sb3",
        config_hash=config_hash,
        seed=seed,
        test_episodes=eval_episodes,
        **made_by,
    )
    return frame.reindex(columns=TIDY_COLUMNS + EXTRA_COLUMNS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--eval-episodes", type=int, default=100)
    parser.add_argument("--out", type=Path, default=SB3_CSV, help="the tidy CSV its rows are merged into")
    args = parser.parse_args()
    torch.set_num_threads(1)
    made_by = provenance()  # before any file is written: the code that runs
    made_by["versions"] += f";stable-baselines3=={metadata.version('stable-baselines3')}"
    made_with = settings(args.rounds, args.eval_episodes)
    config_hash = settings_hash(made_with)
    curves, frames = {}, []
    for seed in args.seeds:
        for arm in ("stock SB3 PPO", "SB3 + IIF"):
            rows = test_returns(seed, arm == "SB3 + IIF", args.rounds, args.eval_episodes)
            frames.append(tidy(rows, seed, arm == "SB3 + IIF", config_hash, args.eval_episodes, made_by))
            returns = curves[arm, seed] = [row["test_return"] for row in rows[1:]]
            print(f"seed {seed} {arm}: final {returns[-1]:.3f}, mean over rounds {np.mean(returns):.3f}", flush=True)
    for arm in ("stock SB3 PPO", "SB3 + IIF"):
        runs = np.array([curves[arm, seed] for seed in args.seeds])
        print(
            f"{arm:14s} final test return {runs[:, -1].mean():.3f}, mean over rounds {runs.mean():.3f}, "
            f"seeds reaching 1: {int((runs.max(axis=1) >= 1).sum())}/{len(args.seeds)} "
            f"(per seed final: {runs[:, -1].round(2).tolist()})"
        )

    rows = commit_external_runs(pd.concat(frames, ignore_index=True), args.out, {config_hash: made_with}, EXTRA_COLUMNS)
    print(f"wrote {len(frames)} runs to {args.out} ({rows.drop_duplicates(EXTERNAL_RUN_KEY).shape[0]} runs there)")


if __name__ == "__main__":
    main()
