"""Stock stable-baselines3 PPO with IIF dropped in: two arguments to PPO and a callback.

    python examples/sb3_iif.py --timesteps 4096 [--env FrozenLake] [--mode iif|random|none] [--p 50]

Prints SB3's own log (the `influence/` keys are the drop-in's) and where each round's scores are kept.
Needs the `sb3` extra (stable-baselines3).
"""

from __future__ import annotations

import argparse
import tempfile

import gymnasium as gym
from stable_baselines3 import PPO
from stable_baselines3.common.logger import configure

from rlinfluence.sb3 import IIFRolloutBuffer, InfluenceFilter

ENVS = {
    "FrozenLake": lambda: gym.make("FrozenLake-v1", map_name="4x4", is_slippery=False),
    "CartPole-v1": lambda: gym.make("CartPole-v1"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timesteps", type=int, default=20_480)
    parser.add_argument("--env", choices=ENVS, default="FrozenLake")
    parser.add_argument("--mode", choices=("iif", "random", "none"), default="iif")
    parser.add_argument("--p", type=float, default=50.0, help="percent of the negative-influence records to drop")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    model = PPO(
        "MlpPolicy",
        ENVS[args.env](),
        n_steps=2048,
        seed=args.seed,
        rollout_buffer_class=IIFRolloutBuffer,  # minibatches skip the records the callback drops
    )
    log_dir = tempfile.mkdtemp(prefix="sb3_iif-")
    model.set_logger(configure(log_dir, ["stdout", "csv"]))
    influence = InfluenceFilter(mode=args.mode, p=args.p, seed=args.seed)
    model.learn(args.timesteps, callback=influence)

    print(
        f"SB3 logger (stdout above, and {log_dir}/progress.csv): influence/"
        + ", influence/".join(key for key in influence.rounds[-1] if key not in ("round", "scores", "dropped"))
    )
    print("callback.rounds: one dict per rollout, with the scores and dropped ids as arrays:")
    for record in influence.rounds:
        print(
            f"  round {record['round']}: {record['n_records']} records, {record['n_negative']} negative, "
            f"{record['n_dropped']} dropped, scores[:3] = {record['scores'][:3].round(5).tolist()}, "
            f"dropped[:5] = {record['dropped'][:5].tolist()}"
        )


if __name__ == "__main__":
    main()
