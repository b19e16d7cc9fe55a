"""Rollout collection from the training envs, and the env state a checkpoint needs.

Episodes continue across rounds (no reset at a round boundary) unless the collection protocol says
otherwise (`collection.*`: the authors' per-round restart, split into its parts). Each episode starts
from `reset(seed=s)` with s drawn from the env's own seeded stream, and the actions taken since are
kept, so a checkpoint can restore every env mid-episode exactly by replaying them: gymnasium
envs are deterministic given the reset seed and the actions. What steps the envs is a backend: the library's
envs (LibraryEnvs), or slots of a batched simulator (SimulatorSlots, envs/batched.py: bit-identical step for step,
which the stacked engine steps for all its seeds at once); TrainEnvs keeps the same bookkeeping on either.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Protocol

import gymnasium as gym
import numpy as np
import torch

from rlinfluence.config.schema import CollectionConfig, EnvConfig
from rlinfluence.envs.batched import BatchedSimulator
from rlinfluence.envs.make import make_env, space_shape, state_key_function, to_env_actions
from rlinfluence.records import RolloutBuffer, compute_gae, env_major


class Steps(NamedTuple):
    """One step of n envs: each one's observation (an ended episode's last), reward, termination and truncation."""

    obs: np.ndarray
    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray


class EnvBackend(Protocol):
    """What steps a TrainEnvs' n envs: the library's envs (LibraryEnvs), or n slots of a batched simulator
    (SimulatorSlots). It resets, steps and replays; TrainEnvs keeps every env's seeds, actions and returns."""

    def reset(self, i: int, seed: int) -> np.ndarray: ...

    def step(self, actions: list[Any]) -> Steps: ...

    def replay(self, seeds: list[int], actions: list[list[Any]]) -> list[np.ndarray]:
        """Each env reset from its seed and stepped with its actions; their observations."""
        ...

    def state_keys(self) -> Sequence[int] | np.ndarray: ...


class LibraryEnvs:
    """The gymnasium envs themselves, stepped one by one."""

    def __init__(self, envs: list[gym.Env], state_key: Callable[[gym.Env], int] | None):
        self.envs, self.state_key = envs, state_key

    def reset(self, i: int, seed: int) -> np.ndarray:
        return self.envs[i].reset(seed=seed)[0]

    def step(self, actions: list[Any]) -> Steps:
        steps = [env.step(action)[:4] for env, action in zip(self.envs, actions)]
        obs, rewards, terminated, truncated = zip(*steps)
        return Steps(np.stack(obs), np.array(rewards, np.float64), np.array(terminated), np.array(truncated))

    def replay(self, seeds: list[int], actions: list[list[Any]]) -> list[np.ndarray]:
        observations = []
        for env, seed, episode in zip(self.envs, seeds, actions):
            obs, _ = env.reset(seed=seed)
            for action in episode:
                obs = env.step(action)[0]
            observations.append(obs)
        return observations

    def state_keys(self) -> list[int]:
        assert self.state_key is not None
        return [self.state_key(env) for env in self.envs]


class SimulatorSlots:
    """`slots` of a batched simulator (envs/batched.py) that other seeds' envs may share: the stacked engine steps
    all of them at once (control/stacked_collect.py) and hands each TrainEnvs its rows. Its state keys are the
    simulator's `state`, which holds the key its STATE_KEY names."""

    def __init__(self, simulator: BatchedSimulator, slots: np.ndarray):
        self.simulator, self.slots = simulator, slots

    def reset(self, i: int, seed: int) -> np.ndarray:
        return self.simulator.reset(self.slots[i : i + 1], np.array([seed]))[0]

    def step(self, actions: list[Any]) -> Steps:
        return Steps(*self.simulator.step(np.array(actions, np.int64), self.slots))

    def replay(self, seeds: list[int], actions: list[list[Any]]) -> list[np.ndarray]:
        """The episodes replayed side by side: step j steps the slots whose episodes have a j-th action."""
        obs = self.simulator.reset(self.slots, np.array(seeds, np.int64))
        for j in range(max(map(len, actions), default=0)):
            going = np.array([i for i, episode in enumerate(actions) if len(episode) > j], np.int64)
            stepped = np.array([actions[i][j] for i in going.tolist()], np.int64)
            obs[going] = self.simulator.step(stepped, self.slots[going])[0]
        return list(obs)

    def state_keys(self) -> np.ndarray:
        return self.simulator.state[self.slots]


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
        self.backend: EnvBackend = LibraryEnvs(self.envs, self.state_key)
        n = len(self.envs)
        self.obs = np.zeros((n, *space_shape(self.observation_space)), self.observation_space.dtype)  # each env's now
        self.episode_seeds = [0] * n
        self.episode_actions: list[list[Any]] = [[] for _ in range(n)]
        self.episode_returns = [0.0] * n
        self.finished_returns: list[float] = []  # episodes completed since the last round's log
        for i in range(n):
            self._reset(i)

    def _reset(self, i: int) -> None:
        self.episode_seeds[i] = int(self.seed_rngs[i].integers(2**31 - 1))
        self.obs[i] = self.backend.reset(i, self.episode_seeds[i])
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

    def step(self, env_actions: Any) -> Steps:
        """Step every env with its action (to_env_actions', a row each) on the backend and record the step."""
        steps = self.backend.step(list(env_actions))
        self.record(env_actions, steps.obs, steps.rewards.tolist(), (steps.terminated | steps.truncated).tolist())
        return steps

    def record(self, env_actions: Any, obs: np.ndarray, rewards: list[float], ended: list[bool]) -> None:
        """Keep a step taken (by `step`, or on the backend's simulator with other seeds' envs): each env's action,
        return and observation (an ended episode's last: its env resets)."""
        self.obs[:] = obs
        for i, (env_action, reward, done) in enumerate(zip(env_actions, rewards, ended)):
            self.episode_actions[i].append(env_action)
            self.episode_returns[i] += reward
            if done:
                self.finished_returns.append(self.episode_returns[i])
                self._reset(i)

    def state_keys(self) -> Sequence[int] | np.ndarray:
        """Each env's discrete state (env.state_key's)."""
        return self.backend.state_keys()

    def move_to(self, backend: EnvBackend) -> None:
        """Step the envs on `backend` from now on, each episode in progress replayed there."""
        self.backend = backend
        self.obs[:] = backend.replay(self.episode_seeds, self.episode_actions)

    def state_dict(self) -> dict[str, Any]:
        return {
            "seed_rngs": [rng.bit_generator.state for rng in self.seed_rngs],
            "episode_seeds": list(self.episode_seeds),
            "episode_actions": [list(actions) for actions in self.episode_actions],
            "episode_returns": list(self.episode_returns),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for i in range(len(self.envs)):
            self.seed_rngs[i].bit_generator.state = state["seed_rngs"][i]
            self.episode_seeds[i] = state["episode_seeds"][i]
            self.episode_actions[i] = list(state["episode_actions"][i])
            self.episode_returns[i] = state["episode_returns"][i]
        self.obs[:] = self.backend.replay(self.episode_seeds, self.episode_actions)

    def close(self) -> None:
        for env in self.envs:
            env.close()


class Critic(Protocol):
    """What a rollout's records are computed with at θ_k: an ActorCritic, or one seed of a stack (control/engine.py)."""

    def values_and_log_probs(self, obs: np.ndarray, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...

    def values(self, obs: np.ndarray) -> np.ndarray: ...


class Rollout:
    """One round's rollout of a stack's seeds (control/engine.py), step by step, the seed axis first: seed i's envs
    are `envs[i]`, its grids the [:, i] of each (n_steps, seeds, n_envs, ...) grid, so one call observes or steps
    every seed's envs. `noise`: the round's action noise, (n_steps, seeds, n_envs, ...) (action_head.draw_noise's of
    each seed)."""

    def __init__(self, envs: Sequence[TrainEnvs], n_steps: int, noise: torch.Tensor):
        first = envs[0]
        grid = (n_steps, len(envs), len(first.envs))
        self.envs, self.n_steps, self.noise = list(envs), n_steps, noise
        self.action_space = first.action_space
        self.obs = np.zeros((*grid, *space_shape(first.observation_space)), first.observation_space.dtype)
        self.action_shape = space_shape(first.action_space)
        self.actions = np.zeros((*grid, *self.action_shape), np.float32)
        self.rewards, self.dones = np.zeros(grid, np.float32), np.zeros(grid, np.float32)
        self.truncations: list[list[tuple[int, int, np.ndarray]]] = [[] for _ in envs]  # per seed: (t, env, obs)
        self.state_keys = np.zeros(grid, np.int64) if first.state_key else None

    def observe(self, t: int) -> np.ndarray:
        """Step t's observations, (seeds, n_envs, ...) (recorded with the envs' discrete states)."""
        for i, seed_envs in enumerate(self.envs):
            self.obs[t, i] = seed_envs.obs
            if self.state_keys is not None:
                self.state_keys[t, i] = seed_envs.state_keys()
        return self.obs[t]

    def act(self, t: int, actions: np.ndarray, simulator: BatchedSimulator | None = None) -> None:
        """Step every env with its action of step t, (seeds, n_envs, ...): each seed's envs on their own, or all of
        them in one step of `simulator`, whose slots are the seeds' envs in order (control/stacked_collect.py)."""
        self.actions[t] = actions
        env_actions = to_env_actions(self.action_space, actions)
        if simulator is None:
            steps = Steps(*map(np.stack, zip(*(envs.step(a) for envs, a in zip(self.envs, env_actions)))))
        else:
            stepped = simulator.step(np.asarray(env_actions, np.int64).reshape(-1))
            steps = Steps(*(part.reshape(*self.rewards.shape[1:], *part.shape[1:]) for part in stepped))
            rewards, ended = steps.rewards.tolist(), (steps.terminated | steps.truncated).tolist()
            for i, seed_envs in enumerate(self.envs):
                seed_envs.record(env_actions[i], steps.obs[i], rewards[i], ended[i])
        self.rewards[t], self.dones[t] = steps.rewards, steps.terminated | steps.truncated
        if steps.truncated.any():  # rare: a time limit reached
            for i, env in np.argwhere(steps.truncated & ~steps.terminated).tolist():
                self.truncations[i].append((t, env, steps.obs[i, env]))

    @torch.no_grad()
    def scored(self, i: int, model: Critic, gamma: float, negated_rewards: torch.Tensor | None = None) -> Scored:
        """Seed i's values and log-probs computed by `model` in one batched pass (same θ_k), which keeps the per-step
        work to the policy head alone, and the rewards GAE reads. `negated_rewards` (bool per record id;
        corruption.kind=reward) negates those records' env rewards."""
        n_steps, _, n_envs = self.rewards.shape
        rewards = self.rewards[:, i]  # a view: GAE reads the grid
        values, log_probs = model.values_and_log_probs(
            self.obs[:, i].reshape(n_steps * n_envs, *self.obs.shape[3:]),
            self.actions[:, i].reshape(n_steps * n_envs, *self.action_shape),
        )
        values, log_probs = values.reshape(n_steps, n_envs), log_probs.reshape(n_steps, n_envs)
        if negated_rewards is not None:  # the env's reward only: a truncation's bootstrap below stays a true value
            grid = negated_rewards.numpy().reshape(n_envs, n_steps).T
            rewards[grid] = -rewards[grid]
        if self.truncations[i]:
            # Time-limit truncation is not a real end: bootstrap from the final observation's value.
            final_values = model.values(np.stack([final for _, _, final in self.truncations[i]]))
            for (t, env, _), value in zip(self.truncations[i], final_values):
                rewards[t, env] += gamma * value
        return Scored(values, model.values(self.envs[i].obs), log_probs)

    def records(self, i: int, scored: Scored, advantages: np.ndarray, deltas: np.ndarray) -> RolloutBuffer:
        """Seed i's records, by record id (env-major), with their GAE advantages and TD errors."""
        n_steps, _, n_envs = self.rewards.shape
        steps = np.broadcast_to(np.arange(n_steps)[:, None], (n_steps, n_envs))
        env_index = np.broadcast_to(np.arange(n_envs)[None, :], (n_steps, n_envs))
        return RolloutBuffer(
            obs=env_major(self.obs[:, i]),
            actions=env_major(self.actions[:, i]),
            log_probs=env_major(scored.log_probs),
            values=env_major(scored.values),
            rewards=env_major(self.rewards[:, i]),
            dones=env_major(self.dones[:, i]),
            advantages=env_major(advantages),
            returns=env_major(advantages + scored.values),
            deltas=env_major(deltas),
            env_index=env_major(env_index.copy()),
            step=env_major(steps.copy()),
            state_keys=None if self.state_keys is None else env_major(self.state_keys[:, i]),
        )


class Scored(NamedTuple):
    """One seed's (n_steps, n_envs) values at θ_k, its envs' last values, and its log-probs."""

    values: np.ndarray
    last_values: np.ndarray
    log_probs: np.ndarray


def rollout_records(rollout: Rollout, scored: Sequence[Scored], gamma: float, gae_lambda: float) -> list[RolloutBuffer]:
    """Each seed's records (`scored`: each seed's), GAE run once for all of them: every seed's envs side by side on
    the env axis, each env's recurrence its own, so a record's advantage has the bits it has alone, for one step
    loop in all."""
    n_steps, seeds, n_envs = rollout.rewards.shape

    def side_by_side(grid: np.ndarray) -> np.ndarray:
        return grid.reshape(n_steps, seeds * n_envs, *grid.shape[3:])

    advantages, deltas = compute_gae(
        side_by_side(rollout.rewards),
        np.stack([seed.values for seed in scored], axis=1).reshape(n_steps, seeds * n_envs),
        side_by_side(rollout.dones),
        np.concatenate([seed.last_values for seed in scored]),
        gamma,
        gae_lambda,
    )
    return [
        rollout.records(i, seed, advantages[:, i * n_envs : (i + 1) * n_envs], deltas[:, i * n_envs : (i + 1) * n_envs])
        for i, seed in enumerate(scored)
    ]
