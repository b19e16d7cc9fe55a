"""Stock stable-baselines3 PPO against the same PPO with IIF dropped in, at the paper's settings.

    python benchmarks/sb3_iif_study.py --env frozenlake|lunarlander [--seeds 0 1 2 3 4] [--rounds N]
        [--eval-episodes N] [--no-grad-clipping] [--out CSV]

FrozenLake-v1 4×4, not slippery (SB3 one-hot encodes its states): 50 rounds, IIF p = 50 %, 100 test
episodes. LunarLander-v3: 150 rounds, p = 12.5 %, 50 test episodes (our CPU evaluation of that env,
figures/control_runs.CPU_EVALUATION). Both: 2,048 records a round, batch 64, 10 epochs, SGD 5e-3, IIF
on f_return (conf/env/<env>.yaml); SB3's defaults otherwise (64×64 tanh MLP, γ 0.99, λ 0.95, clip 0.2,
max_grad_norm 0.5). `--no-grad-clipping`: max_grad_norm = inf, so SB3's clip_grad_norm_ scales every
gradient by exactly 1 (the authors' patched SB3 disabled clipping; issue 42, lead 3). The initial policy
and the policy after every round are tested: the test return is the mean over the test episodes of the
stochastic policy. Prints per arm the mean over seeds of the final test return and of the mean test
return over rounds (SE_ave's quantity). Needs the `sb3` extra.

Writes the runs as tidy rows (figures/runs.py) to paper_figures/data/sb3.csv (`--out`): experiment `sb3`,
protocol `sb3` (`sb3-noclip` without clipping, whose settings name max_grad_norm), arms `ppo` and
`iif-p<p>`, round k = the test after k updates (round 0 = the initial policy), and names what made them
in settings.json under their config_hash. Each run's rows are merged as soon as it finishes, replacing
those of the same (env, arm, protocol, seed); others are kept (as benchmarks/authors_pipeline/convert.py
does), so a cut-off study keeps its finished runs.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import gymnasium as gym
import numpy as np
import pandas as pd
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.monitor import Monitor

from rlinfluence.config.paths import REPO_ROOT
from rlinfluence.figures.runs import EXTERNAL_RUN_KEY, TIDY_COLUMNS, commit_external_runs
from rlinfluence.figures.sb3_dropin import SB3, SB3_NO_CLIPPING
from rlinfluence.run.provenance import provenance
from rlinfluence.sb3 import IIFRolloutBuffer, InfluenceFilter

N_STEPS = 2048
SB3_MAX_GRAD_NORM = 0.5  # SB3's PPO default, the clipped study's
SB3_CSV = REPO_ROOT / "paper_figures" / "data" / "sb3.csv"
EXTRA_COLUMNS = ["test_episodes"]


@dataclass(frozen=True)
class Study:
    """One env's paper settings (conf/env/<env>.yaml) and how its test episodes run."""

    env_id: str  # as settings.json names it
    make: Callable[[], gym.Env]
    p: float
    rounds: int
    eval_episodes: int
    eval_envs: int  # test episodes side by side (one batched forward a step); 1 = one Monitor env


STUDIES = {
    "frozenlake": Study(
        "FrozenLake-v1 (4x4, is_slippery=False)",
        lambda: gym.make("FrozenLake-v1", map_name="4x4", is_slippery=False),
        p=50.0,
        rounds=50,
        eval_episodes=100,
        eval_envs=1,
    ),
    "lunarlander": Study("LunarLander-v3", lambda: gym.make("LunarLander-v3"), 12.5, 150, 50, eval_envs=10),
}


def eval_env(study: Study, seed: int):
    """The test env(s), seeded apart from training; evaluate_policy reads episode returns from Monitor."""
    if study.eval_envs == 1:
        env = Monitor(study.make())
        env.reset(seed=10_000 + seed)
        return env
    return make_vec_env(study.make, n_envs=study.eval_envs, seed=10_000 + seed)


def test_returns(study: Study, seed: int, iif: bool, rounds: int, eval_episodes: int, clipped: bool) -> list[dict]:
    """One row per test of one run: the initial policy's (round 0), then the policy's after each round."""
    buffer = {"rollout_buffer_class": IIFRolloutBuffer} if iif else {}
    model = PPO(
        "MlpPolicy",
        study.make(),
        n_steps=N_STEPS,
        batch_size=64,
        n_epochs=10,
        learning_rate=5e-3,
        policy_kwargs={"optimizer_class": torch.optim.SGD},
        max_grad_norm=SB3_MAX_GRAD_NORM if clipped else float("inf"),
        seed=seed,
        **buffer,
    )
    callback = InfluenceFilter(mode="iif", p=study.p) if iif else None
    test_env = eval_env(study, seed)
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
        mean, _ = evaluate_policy(model, test_env, n_eval_episodes=eval_episodes, deterministic=False)
        rows.append({**row, "test_return": float(mean), "time_eval": time.perf_counter() - start})
    return rows


def settings(env: str, study: Study, rounds: int, eval_episodes: int, clipped: bool) -> dict:
    """What made the rows; hashed into their config_hash. SB3's max_grad_norm is named only when it is not
    SB3's default, so the clipped study's committed rows keep their hash; null: never clips (JSON has no inf)."""
    made_with = {
        "script": "benchmarks/sb3_iif_study.py",
        "stable-baselines3": metadata.version("stable-baselines3"),
        "env_id": study.env_id,
        "n_steps": N_STEPS,
        "batch_size": 64,
        "n_epochs": 10,
        "learning_rate": 5e-3,
        "optimizer": "sgd",
        "p": study.p,
        "mode": "iif",
        "rounds": rounds,
        "test_episodes": eval_episodes,
        "deterministic_test": False,
    }
    made_with |= {} if clipped else {"max_grad_norm": None}
    return made_with | ({"test_envs": study.eval_envs} if study.eval_envs > 1 else {})


def settings_hash(known: dict) -> str:
    return hashlib.sha256(json.dumps(known, sort_keys=True).encode()).hexdigest()[:6]


def tidy(
    rows: list[dict],
    env: str,
    p: float,
    seed: int,
    iif: bool,
    config_hash: str,
    eval_episodes: int,
    made_by: dict,
    clipped: bool,
):
    frame = pd.DataFrame(rows).assign(
        experiment="sb3",
        env=env,
        method="iif" if iif else "ppo",
        method_tag=f"iif-p{p:g}" if iif else "ppo",
        p=p if iif else float("nan"),
        optimizer="sgd",
        protocol=SB3 if clipped else SB3_NO_CLIPPING,  # the variants are separate runs of each arm
        config_hash=config_hash,
        seed=seed,
        test_episodes=eval_episodes,
        **made_by,
    )
    return frame.reindex(columns=TIDY_COLUMNS + EXTRA_COLUMNS)


def commit_run(frame: pd.DataFrame, out: Path, settings_of: dict) -> int:
    """Merge one finished run into the CSV under a lock, so two studies running side by side lose nothing."""
    with open(Path(tempfile.gettempdir()) / f"rlinfluence-{out.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        rows = commit_external_runs(frame, out, settings_of, EXTRA_COLUMNS)
    return rows.drop_duplicates(EXTERNAL_RUN_KEY).shape[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", choices=sorted(STUDIES), default="frozenlake")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--arms", nargs="+", choices=["ppo", "iif"], default=["ppo", "iif"])
    parser.add_argument("--rounds", type=int, help="default: the paper's for --env")
    parser.add_argument("--eval-episodes", type=int, help="default: the env's CPU evaluation")
    parser.add_argument(
        "--no-grad-clipping",
        action="store_true",
        help="max_grad_norm=inf (SB3 never clips, as the authors' patched SB3); rows of protocol " + SB3_NO_CLIPPING,
    )
    parser.add_argument("--out", type=Path, default=SB3_CSV, help="the tidy CSV its rows are merged into")
    args = parser.parse_args()
    study = STUDIES[args.env]
    rounds, eval_episodes = args.rounds or study.rounds, args.eval_episodes or study.eval_episodes
    torch.set_num_threads(1)
    made_by = provenance("cpu")  # before any file is written: the code and hardware that run
    made_by["versions"] += f";stable-baselines3=={metadata.version('stable-baselines3')}"
    clipped = not args.no_grad_clipping
    made_with = settings(args.env, study, rounds, eval_episodes, clipped)
    config_hash = settings_hash(made_with)
    curves = {}
    for seed in args.seeds:
        for arm in args.arms:
            start = time.perf_counter()
            rows = test_returns(study, seed, arm == "iif", rounds, eval_episodes, clipped)
            frame = tidy(rows, args.env, study.p, seed, arm == "iif", config_hash, eval_episodes, made_by, clipped)
            runs_there = commit_run(frame, args.out, {config_hash: made_with})
            returns = curves[arm, seed] = [row["test_return"] for row in rows[1:]]
            print(
                f"{args.env} seed {seed} {arm}: final {returns[-1]:.3f}, mean over rounds {np.mean(returns):.3f} "
                f"({time.perf_counter() - start:.0f} s; {runs_there} runs in {args.out})",
                flush=True,
            )
    for arm in args.arms:
        runs = np.array([curves[arm, seed] for seed in args.seeds])
        print(
            f"{arm:4s} final test return {runs[:, -1].mean():.3f}, mean over rounds {runs.mean():.3f} "
            f"(per seed final: {runs[:, -1].round(2).tolist()})"
        )


if __name__ == "__main__":
    main()
