"""Stock stable-baselines3 PPO against the same PPO with IIF dropped in (rlinfluence.sb3), in one process.

    python benchmarks/sb3_iif_speed.py [--rounds 5] [--envs FrozenLake CartPole-v1]
    python benchmarks/sb3_iif_speed.py --rounds 1 --envs FrozenLake --n-steps 64   # smoke: seconds

Both sides: SB3's PPO on the paper's FrozenLake settings (2,048 records a round, batch 64, 10 epochs,
SGD 5e-3, one env, one torch thread), the same seed. Rounds alternate between the two models so that
a busy machine slows all alike; prints the median seconds per round (collect + score + update) and
its ratio to stock (the goal for IIF: ≤ 1.15). `attribution only` (mode none) trains on every record,
so its ratio is the scoring's cost alone; IIF's also saves the dropped records' minibatches.
Needs the `sb3` extra.
"""

from __future__ import annotations

import argparse
import statistics
import time

import gymnasium as gym
import torch
from stable_baselines3 import PPO

from rlinfluence.sb3 import IIFRolloutBuffer, InfluenceFilter

ENVS = {
    "FrozenLake": lambda: gym.make("FrozenLake-v1", map_name="4x4", is_slippery=False),
    "CartPole-v1": lambda: gym.make("CartPole-v1"),
}


def make_ppo(env: str, iif: bool, n_steps: int) -> PPO:
    buffer = {"rollout_buffer_class": IIFRolloutBuffer} if iif else {}
    return PPO(
        "MlpPolicy",
        ENVS[env](),
        n_steps=n_steps,
        batch_size=64,
        n_epochs=10,
        learning_rate=5e-3,
        policy_kwargs={"optimizer_class": torch.optim.SGD},
        seed=0,
        **buffer,
    )


def timed_round(model: PPO, callback: InfluenceFilter | None) -> float:
    start = time.perf_counter()
    model.learn(model.n_steps, callback=callback, reset_num_timesteps=False)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--envs", nargs="+", choices=ENVS, default=list(ENVS))
    parser.add_argument("--n-steps", type=int, default=2048, help="records a round (the paper's 2,048)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    for env in args.envs:
        # arm -> (model, callback): stock PPO, scoring alone (mode none: the full update), IIF at p = 50
        arms = {
            "stock SB3 PPO": (make_ppo(env, False, args.n_steps), None),
            "SB3 + attribution only": (make_ppo(env, True, args.n_steps), InfluenceFilter(mode="none")),
            "SB3 + IIF": (make_ppo(env, True, args.n_steps), InfluenceFilter(mode="iif", p=50)),
        }
        for model, callback in arms.values():
            timed_round(model, callback)  # warm-up: first-call costs on every side
        seconds: dict[str, list[float]] = {arm: [] for arm in arms}
        for _ in range(args.rounds):
            for arm, (model, callback) in arms.items():
                seconds[arm].append(timed_round(model, callback))
        medians = {arm: statistics.median(times) for arm, times in seconds.items()}
        stock = medians["stock SB3 PPO"]
        print(f"{env} (median of {args.rounds} rounds):")
        for arm, median in medians.items():
            print(f"  {arm:24s} {median:.3f} s/round, ratio to stock {median / stock:.3f}")


if __name__ == "__main__":
    main()
