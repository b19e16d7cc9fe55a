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
from rlinfluence.envs.make import make_env, to_env_actions
from rlinfluence.seeding import child_stream, torch_generator


class EvaluationRound:
    """One round's evaluation episodes of an Evaluator in progress, whatever steps its envs: the round's episode
    seeds and action noise, which episode each env slot runs, and the returns. Evaluator.evaluate steps the
    library's envs with it; the stacked engine (control/stacked_evaluation.py) steps several seeds' rounds on one
    batched simulator. Slots run in ascending order, and a slot whose episode ends takes the next episode while any is
    left (the lowest ended slot first)."""

    def __init__(self, evaluator: Evaluator, round_index: int):
        self.seeds, self.generator = evaluator.round_seeds(round_index)
        self.episodes = evaluator.episodes
        self.n_slots = len(evaluator.envs)
        self.returns = np.zeros(self.episodes)
        self.episode_of = np.full(self.n_slots, -1)  # env slot -> the episode it is running; -1: done
        self.next_episode = 0

    def start(self) -> tuple[np.ndarray, np.ndarray]:
        """The slots to reset before the first step, and their episode seeds."""
        return self._begin(np.arange(self.n_slots))

    def _begin(self, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The next episodes for `slots`, as many as are left; the slots that took one, and their seeds."""
        taking = slots[: self.episodes - self.next_episode]
        self.episode_of[slots[len(taking) :]] = -1
        episodes = self.next_episode + np.arange(len(taking))
        self.episode_of[taking] = episodes
        self.next_episode += len(taking)
        return taking, self.seeds[episodes]

    @property
    def live_slots(self) -> np.ndarray:
        return np.flatnonzero(self.episode_of >= 0)

    def actions(self, model: ActorCritic, observations: np.ndarray) -> np.ndarray:
        """The live slots' actions (their observations stacked in slot order), this step's noise drawn for them."""
        noise = model.action_head.draw_noise((len(observations),), self.generator)
        return model.sample_actions(observations, noise)

    def record(self, slots: np.ndarray, rewards: np.ndarray, ended: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The step's rewards of `slots` (ascending) and whose episode ended; the slots to reset, and their seeds."""
        self.returns[self.episode_of[slots]] += rewards  # one slot per episode: no index twice
        return self._begin(slots[ended])

    def metrics(self) -> dict[str, float]:
        sem = self.returns.std(ddof=1) / np.sqrt(self.episodes) if self.episodes > 1 else float("nan")
        return {
            "test_return": float(self.returns.mean()),
            "test_return_sem": float(sem),
            "eval_episodes": self.episodes,
        }


class Evaluator:
    def __init__(self, env_cfg: EnvConfig, eval_cfg: EvalConfig, seed_seq: np.random.SeedSequence):
        self.episodes = eval_cfg.episodes
        self.envs = [make_env(env_cfg) for _ in range(min(eval_cfg.n_parallel, eval_cfg.episodes))]
        self.seed_seq = seed_seq

    def round_seeds(self, round_index: int) -> tuple[np.ndarray, torch.Generator]:
        """Round `round_index`'s episode seeds and action-noise generator."""
        episode_seq, action_seq = child_stream(self.seed_seq, round_index).spawn(2)
        seeds = np.random.default_rng(episode_seq).integers(2**31 - 1, size=self.episodes)
        return seeds, torch_generator(action_seq)

    @torch.no_grad()
    def evaluate(self, model: ActorCritic, round_index: int) -> dict[str, float]:
        episodes = EvaluationRound(self, round_index)
        action_space = self.envs[0].action_space
        obs: list[np.ndarray] = [np.empty(0)] * len(self.envs)
        starting, seeds = episodes.start()
        while True:
            for slot, seed in zip(starting, seeds):
                obs[slot], _ = self.envs[slot].reset(seed=int(seed))
            slots = episodes.live_slots
            if not slots.size:
                return episodes.metrics()
            actions = episodes.actions(model, np.stack([obs[slot] for slot in slots]))
            rewards, ended = np.zeros(len(slots)), np.zeros(len(slots), bool)
            for j, (slot, env_action) in enumerate(zip(slots, to_env_actions(action_space, actions))):
                obs[slot], rewards[j], terminated, truncated, _ = self.envs[slot].step(env_action)
                ended[j] = terminated or truncated
            starting, seeds = episodes.record(slots, rewards, ended)

    def close(self) -> None:
        for env in self.envs:
            env.close()
