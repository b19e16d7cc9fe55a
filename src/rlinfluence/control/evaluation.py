"""Test return: mean undiscounted return of the stochastic policy over many episodes.

Evaluation envs are separate from the training envs. `n_parallel` episodes run side by side with
one batched no-grad forward pass per step, which is what makes the paper's 1,000 episodes per
round affordable on a CPU. Episode seeds and action noise are derived from (eval seed, round), so
a round's evaluation does not depend on anything the training consumed, every method sees the same
episode seeds at the same round, and a resumed run evaluates exactly as an uninterrupted one.
"""

from __future__ import annotations

import numpy as np
import torch

from rlinfluence.config.schema import EnvConfig, EvalConfig
from rlinfluence.control.networks import ActorCritic
from rlinfluence.envs.make import make_env, to_env_action
from rlinfluence.seeding import child_stream, torch_generator


class Evaluator:
    def __init__(self, env_cfg: EnvConfig, eval_cfg: EvalConfig, seed_seq: np.random.SeedSequence):
        self.episodes = eval_cfg.episodes
        self.envs = [make_env(env_cfg) for _ in range(min(eval_cfg.n_parallel, eval_cfg.episodes))]
        self.seed_seq = seed_seq

    def _round_seeds(self, round_index: int) -> tuple[np.ndarray, torch.Generator]:
        episode_seq, action_seq = child_stream(self.seed_seq, round_index).spawn(2)
        seeds = np.random.default_rng(episode_seq).integers(2**31 - 1, size=self.episodes)
        return seeds, torch_generator(action_seq)

    @torch.no_grad()
    def evaluate(self, model: ActorCritic, round_index: int) -> dict[str, float]:
        seeds, generator = self._round_seeds(round_index)
        returns = np.zeros(self.episodes)
        episode_of = {}  # env slot -> the episode it is running
        obs = {}
        next_episode = 0
        for slot, env in enumerate(self.envs):
            obs[slot], _ = env.reset(seed=int(seeds[next_episode]))
            episode_of[slot] = next_episode
            next_episode += 1
        action_space = self.envs[0].action_space
        while episode_of:
            slots = list(episode_of)
            noise = model.action_head.draw_noise((len(slots),), generator)
            actions = model.sample_actions(np.stack([obs[s] for s in slots]), noise)
            for slot, action in zip(slots, actions):
                obs[slot], reward, terminated, truncated, _ = self.envs[slot].step(to_env_action(action_space, action))
                returns[episode_of[slot]] += reward
                if terminated or truncated:
                    if next_episode < self.episodes:
                        obs[slot], _ = self.envs[slot].reset(seed=int(seeds[next_episode]))
                        episode_of[slot] = next_episode
                        next_episode += 1
                    else:
                        del episode_of[slot]
        sem = returns.std(ddof=1) / np.sqrt(self.episodes) if self.episodes > 1 else float("nan")
        return {"test_return": float(returns.mean()), "test_return_sem": float(sem), "eval_episodes": self.episodes}

    def close(self) -> None:
        for env in self.envs:
            env.close()
