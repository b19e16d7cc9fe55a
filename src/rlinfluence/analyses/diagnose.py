"""`task=diagnose` (paper §4.1, Fig. 3, 8): what the records with the most negative influence are.

At round k of a standard-PPO run, the round's buffer (collected by θ_k) is scored with f_return and
ranked by decreasing influence. Beside each record's GAE advantage Â stands its true advantage
Ā(s, a) = Q^π(s, a) − V^π(s) under θ_k: Monte-Carlo rollouts from the record's state (a fresh env put
into it, envs.STATE_SETTERS), `analysis.diagnose.rollouts` per action, V^π(s) = Σ_b π(b|s) Q^π(s, b).
Rollouts start with the env's step counter at 0 (the state key holds no time): FrozenLake's rewards do
not depend on time; MiniGrid's shrink with the episode's step count, which this Ā leaves out.
"""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pandas as pd
import torch
from omegaconf import DictConfig
from tqdm import tqdm

from rlinfluence.analyses.standard_run import (
    analyse_rounds,
    before_round,
    check_at_least_one,
    check_outputs,
    check_rounds,
)
from rlinfluence.choices import ConfigError
from rlinfluence.config.compose import envs_with_state_key
from rlinfluence.config.schema import EnvConfig
from rlinfluence.control.engine import Seed
from rlinfluence.control.networks import ActorCritic
from rlinfluence.envs.make import STATE_SETTERS, make_env
from rlinfluence.records import RolloutBuffer
from rlinfluence.run.tasks import register
from rlinfluence.seeding import torch_generator

ROLLOUTS_SIDE_BY_SIDE = 256  # envs stepped together with one batched forward pass


@torch.no_grad()
def rollout_returns(
    model: ActorCritic,
    env_cfg: EnvConfig,
    starts: list[tuple[int, int]],
    gamma: float,
    seed_seq: np.random.SeedSequence,
    progress: bool = False,
) -> np.ndarray:
    """Discounted return of one episode per (state key, first action) in `starts`, the policy acting after
    the first step; rollouts run side by side in batches."""
    assert env_cfg.state_key is not None  # check_diagnose refuses an env without one
    set_state = STATE_SETTERS[env_cfg.state_key]
    # In the env the records were collected in (env.train_make_kwargs, where set)
    envs = [make_env(env_cfg, collection=True) for _ in range(min(ROLLOUTS_SIDE_BY_SIDE, len(starts)))]
    generator = torch_generator(seed_seq)
    returns = np.zeros(len(starts))
    try:
        for first in tqdm(range(0, len(starts), len(envs)), desc="rollouts", unit="batch", disable=not progress):
            batch = starts[first : first + len(envs)]
            obs, alive, discount = {}, [], np.ones(len(batch))
            for slot, (state, action) in enumerate(batch):
                envs[slot].reset(seed=first + slot)
                set_state(envs[slot], state)
                obs[slot], ended = _step(envs[slot], action, returns, first + slot, 1.0)
                alive += [] if ended else [slot]
            while alive:
                discount[alive] *= gamma
                noise = model.action_head.draw_noise((len(alive),), generator)
                actions = model.sample_actions(np.stack([obs[slot] for slot in alive]), noise)
                still = []
                for slot, action in zip(alive, actions):
                    obs[slot], ended = _step(envs[slot], int(action), returns, first + slot, discount[slot])
                    still += [] if ended else [slot]
                alive = still
    finally:
        for env in envs:
            env.close()
    return returns


def _step(env: gym.Env, action: int, returns: np.ndarray, index: int, discount: float) -> tuple[np.ndarray, bool]:
    obs, reward, terminated, truncated, _ = env.step(action)
    returns[index] += discount * float(reward)
    return obs, terminated or truncated


def action_values(
    model: ActorCritic,
    env_cfg: EnvConfig,
    states: np.ndarray,
    n_actions: int,
    rollouts: int,
    gamma: float,
    seed_seq: np.random.SeedSequence,
    progress: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Monte-Carlo Q^π(s, a) for every state in `states` and every action, and its standard error."""
    starts = [(int(s), a) for s in states for a in range(n_actions) for _ in range(rollouts)]
    returns = rollout_returns(model, env_cfg, starts, gamma, seed_seq, progress)
    returns = returns.reshape(len(states), n_actions, rollouts)
    return returns.mean(-1), returns.std(-1, ddof=1) / np.sqrt(rollouts)


def true_advantages(
    model: ActorCritic,
    env_cfg: EnvConfig,
    buffer: RolloutBuffer,
    rollouts: int,
    gamma: float,
    seed_seq: np.random.SeedSequence,
    progress: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Ā(s, a) of every record and its standard error (rollouts of different actions are independent:
    Var Ā(s, a) = Σ_b (1[a = b] − π(b|s))² SE²(s, b))."""
    assert buffer.state_keys is not None  # collected for an env with env.state_key
    keys = buffer.state_keys.numpy()
    states, first_record, state_of = np.unique(keys, return_index=True, return_inverse=True)
    with torch.no_grad():
        probs = torch.softmax(model.policy_output(buffer.obs[first_record].to(model.device)), -1).cpu().numpy()
    q, q_se = action_values(model, env_cfg, states, probs.shape[1], rollouts, gamma, seed_seq, progress)
    advantage = q - (probs * q).sum(1, keepdims=True)
    weights = np.eye(probs.shape[1])[None] - probs[:, None, :]  # [state, a, b] = 1[a = b] − π(b|s)
    advantage_se = np.sqrt((weights**2 * q_se[:, None, :] ** 2).sum(-1))
    actions = buffer.actions.numpy().astype(np.int64)
    return advantage[state_of.reshape(-1), actions], advantage_se[state_of.reshape(-1), actions]


def check_diagnose(cfg: DictConfig) -> None:
    if cfg.env.state_key not in STATE_SETTERS:
        raise ConfigError(
            f"task=diagnose rolls out from each record's state, which env={cfg.env.name} cannot be "
            f"put into (no env.state_key); envs that can: {', '.join(envs_with_state_key())}"
        )
    check_outputs(cfg)
    settings = cfg.analysis.diagnose
    check_rounds(cfg, "analysis.diagnose.rounds", list(settings.rounds))
    check_at_least_one(settings, "analysis.diagnose", {"rollouts": "Monte-Carlo rollouts per (state, action)"})


def diagnose_round(trainer: Seed, run_dir: Path, k: int) -> pd.DataFrame:
    cfg = trainer.cfg
    before_round(trainer, run_dir, k)
    buffer = trainer.collect(k)
    scores = trainer.influence(buffer)
    seed_seq = np.random.SeedSequence([cfg.seed, k])
    advantage, advantage_se = true_advantages(
        trainer.model, cfg.env, buffer, cfg.analysis.diagnose.rollouts, cfg.ppo.gamma, seed_seq, cfg.progress
    )
    rank = np.empty(len(buffer), np.int64)
    rank[np.argsort(-scores, kind="stable")] = np.arange(1, len(buffer) + 1)
    assert buffer.state_keys is not None  # as in true_advantages
    return pd.DataFrame(
        {
            "env": cfg.env.name,
            "seed": cfg.seed,
            "round": k,
            "record": np.arange(len(buffer)),
            "rank": rank,
            "influence": scores,
            "state": buffer.state_keys.numpy(),
            "action": buffer.actions.numpy().astype(np.int64),
            "advantage_gae": buffer.advantages.numpy(),
            "advantage_true": advantage,
            "advantage_true_se": advantage_se,
        }
    ).sort_values("rank")


@register("diagnose", check=check_diagnose)
def diagnose(cfg: DictConfig) -> pd.DataFrame:
    return analyse_rounds(cfg, "diagnose", list(cfg.analysis.diagnose.rounds), diagnose_round)
