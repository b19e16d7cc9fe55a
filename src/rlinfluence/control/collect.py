"""Rollout collection from the training envs, and the env state a checkpoint needs.

Episodes continue across rounds (no reset at a round boundary) unless the collection protocol says
otherwise (`collection.*`: the authors' per-round restart, split into its parts). Each episode starts
from `reset(seed=s)` with s drawn from the env's own seeded stream, and the actions taken since are
kept, so a checkpoint can restore every env mid-episode exactly by replaying them: gymnasium
envs are deterministic given the reset seed and the actions.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rlinfluence.config.schema import CollectionConfig, EnvConfig
from rlinfluence.control.networks import ActorCritic
from rlinfluence.envs.make import make_env, space_shape, state_key_function, to_env_action
from rlinfluence.records import RolloutBuffer, compute_gae, env_major


class TrainEnvs:
    def __init__(
        self, env_cfg: EnvConfig, seed_seq: np.random.SeedSequence, collection: CollectionConfig | None = None
    ):
        self.envs = [make_env(env_cfg, collection=True) for _ in range(env_cfg.n_envs)]
        self.seed_rngs = [np.random.default_rng(child) for child in seed_seq.spawn(env_cfg.n_envs)]
        self.first_seed_states = [rng.bit_generator.state for rng in self.seed_rngs]
        self.collection = collection or CollectionConfig()
        self.observation_space = self.envs[0].observation_space
        self.action_space = self.envs[0].action_space
        self.state_key = state_key_function(env_cfg)  # None: the env exposes no discrete state
        n = len(self.envs)
        self.obs: list[np.ndarray] = [None] * n  # type: ignore[list-item]
        self.episode_seeds = [0] * n
        self.episode_actions: list[list[Any]] = [[] for _ in range(n)]
        self.episode_returns = [0.0] * n
        self.finished_returns: list[float] = []  # episodes completed since the last round's log
        for i in range(n):
            self._reset(i)

    def _reset(self, i: int) -> None:
        self.episode_seeds[i] = int(self.seed_rngs[i].integers(2**31 - 1))
        self.obs[i], _ = self.envs[i].reset(seed=self.episode_seeds[i])
        self.episode_actions[i] = []
        self.episode_returns[i] = 0.0

    def start_round(self) -> None:
        """Apply the collection protocol before a round's rollout (nothing, for the clean protocol).

        repeat_starts rewinds each env's stream of episode seeds, so every round's episodes start
        from the same seeded states; an env that has not stepped yet is reset from the rewound stream,
        which makes round 1 identical to the clean protocol's. abandon_unfinished drops the episode
        in progress (its partial return is not reported)."""
        for i in range(len(self.envs)):
            started = bool(self.episode_actions[i])
            if self.collection.repeat_starts:
                self.seed_rngs[i].bit_generator.state = self.first_seed_states[i]
            if (self.collection.abandon_unfinished and started) or (self.collection.repeat_starts and not started):
                self._reset(i)

    def step(self, i: int, action: np.ndarray) -> tuple[float, bool, bool, np.ndarray]:
        """Step env i; on episode end reset it. Returns (reward, terminated, truncated, final_obs)."""
        env_action = to_env_action(self.action_space, action)
        obs, reward, terminated, truncated, _ = self.envs[i].step(env_action)
        self.episode_actions[i].append(env_action)
        self.episode_returns[i] += float(reward)
        if terminated or truncated:
            self.finished_returns.append(self.episode_returns[i])
            self._reset(i)
        else:
            self.obs[i] = obs
        return float(reward), bool(terminated), bool(truncated), obs

    def state_dict(self) -> dict[str, Any]:
        return {
            "seed_rngs": [rng.bit_generator.state for rng in self.seed_rngs],
            "episode_seeds": list(self.episode_seeds),
            "episode_actions": [list(actions) for actions in self.episode_actions],
            "episode_returns": list(self.episode_returns),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for i, env in enumerate(self.envs):
            self.seed_rngs[i].bit_generator.state = state["seed_rngs"][i]
            self.episode_seeds[i] = state["episode_seeds"][i]
            self.obs[i], _ = env.reset(seed=self.episode_seeds[i])
            for action in state["episode_actions"][i]:
                self.obs[i] = env.step(action)[0]
            self.episode_actions[i] = list(state["episode_actions"][i])
            self.episode_returns[i] = state["episode_returns"][i]

    def close(self) -> None:
        for env in self.envs:
            env.close()


@torch.no_grad()
def collect_rollout(
    model: ActorCritic,
    envs: TrainEnvs,
    n_steps: int,
    gamma: float,
    gae_lambda: float,
    generator: torch.Generator,
    negated_rewards: torch.Tensor | None = None,
) -> RolloutBuffer:
    """Step the envs with the current policy; values and log-probs are computed afterwards in one
    batched pass (same θ_k), which keeps the per-step work to the policy head alone. `negated_rewards`
    (bool per record id; corruption.kind=reward) negates those records' env rewards before GAE."""
    n_envs = len(envs.envs)
    obs_buf = np.zeros((n_steps, n_envs, *space_shape(envs.observation_space)), envs.observation_space.dtype)
    action_shape = space_shape(envs.action_space)
    actions_buf = np.zeros((n_steps, n_envs, *action_shape), np.float32)
    rewards, dones = np.zeros((n_steps, n_envs), np.float32), np.zeros((n_steps, n_envs), np.float32)
    truncations: list[tuple[int, int, np.ndarray]] = []  # (t, env, final obs) to bootstrap from
    noise = model.action_head.draw_noise((n_steps, n_envs), generator)
    state_key = envs.state_key
    state_keys = np.zeros((n_steps, n_envs), np.int64) if state_key else None

    for t in range(n_steps):
        obs_buf[t] = np.stack(envs.obs)
        if state_key is not None and state_keys is not None:
            state_keys[t] = [state_key(env) for env in envs.envs]
        actions_buf[t] = model.sample_actions(obs_buf[t], noise[t])
        for i in range(n_envs):
            rewards[t, i], terminated, truncated, final_obs = envs.step(i, actions_buf[t, i])
            dones[t, i] = float(terminated or truncated)
            if truncated and not terminated:
                truncations.append((t, i, final_obs))

    values, log_probs = model.values_and_log_probs(
        obs_buf.reshape(n_steps * n_envs, *obs_buf.shape[2:]), actions_buf.reshape(n_steps * n_envs, *action_shape)
    )
    values, log_probs = values.reshape(n_steps, n_envs), log_probs.reshape(n_steps, n_envs)
    if negated_rewards is not None:  # the env's reward only: a truncation's bootstrap below stays a true value
        grid = negated_rewards.numpy().reshape(n_envs, n_steps).T
        rewards[grid] = -rewards[grid]
    if truncations:
        # Time-limit truncation is not a real end: bootstrap from the final observation's value.
        final_values = model.values(np.stack([final for _, _, final in truncations]))
        for (t, i, _), value in zip(truncations, final_values):
            rewards[t, i] += gamma * value
    last_values = model.values(np.stack(envs.obs))
    advantages, deltas = compute_gae(rewards, values, dones, last_values, gamma, gae_lambda)
    steps = np.broadcast_to(np.arange(n_steps)[:, None], (n_steps, n_envs))
    env_index = np.broadcast_to(np.arange(n_envs)[None, :], (n_steps, n_envs))
    return RolloutBuffer(
        obs=env_major(obs_buf),
        actions=env_major(actions_buf),
        log_probs=env_major(log_probs),
        values=env_major(values),
        rewards=env_major(rewards),
        dones=env_major(dones),
        advantages=env_major(advantages),
        returns=env_major(advantages + values),
        deltas=env_major(deltas),
        env_index=env_major(env_index.copy()),
        step=env_major(steps.copy()),
        state_keys=None if state_keys is None else env_major(state_keys),
    )
