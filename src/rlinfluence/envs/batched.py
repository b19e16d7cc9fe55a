"""Batched simulators: N independent copies of a gymnasium toy env stepped at once on numpy arrays, bit-identical
step for step to the env `make_env` builds (its wrappers and TimeLimit included) under the same reset seeds and
actions (tests/envs/test_batched.py; speed: benchmarks/batched_seeds.py --stages envs).

A library env's step is Python overhead around little physics, paid per env; a batched step is a fixed number of
numpy calls whatever N (about 1.5 library steps' time for FrozenLake, 4 for Acrobot), so it wins from N ~ 4 on.
Each slot is reset with an explicit seed (`env.reset(seed=s)`, the only reset the collector and the evaluator
make): its generator is gymnasium's own `seeding.np_random(s)`, drawn from as the env draws. Nothing resets itself:
`step` returns the episode's last observation and the caller resets the slots that ended, as it does with gymnasium
envs. The simulators read the made env's model (FrozenLake's transition table, Acrobot's constants, the TimeLimit),
so a map, `is_slippery` or `max_episode_steps` given in make_kwargs carries over.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, cast

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control.acrobot import AcrobotEnv
from gymnasium.envs.toy_text.frozen_lake import FrozenLakeEnv
from gymnasium.utils import seeding

from rlinfluence.envs.make import EnvSettings, make_env


class BatchedSimulator:
    """N slots of one env. `reset(slots, seeds)` starts those slots' episodes and returns their observations;
    `step(actions)` advances every slot and returns (observations [N, ...], rewards float64 [N], terminated [N],
    truncated [N]), truncated as the TimeLimit wrapper sets it (elapsed steps >= max_episode_steps);
    `step(actions, slots)` advances those slots alone (one action each), the others left as they are, and returns
    theirs: the evaluator steps only the slots whose episodes still run."""

    LIBRARY_ENV: ClassVar[type[gym.Env]]  # the unwrapped env it replays
    WRAPPERS: ClassVar[tuple[str, ...]]  # the env.wrappers it replays, in order
    STATE_KEY: ClassVar[str | None]  # the env.state_key whose key `state` holds per slot; None: none
    # The fewest slots at which one step of all of them costs no more CPU than stepping as many library envs in turn
    # (`python benchmarks/batched_seeds.py --envs frozenlake acrobot --seeds 1 2 4 8 16 --stages envs`): below it, a
    # slot's array arithmetic costs more than the library env's scalar arithmetic.
    PAYS_FROM: ClassVar[int]
    state: np.ndarray  # what the library env holds of each slot (the unwrapped env's `s`, or `state` as rows)

    def __init__(self, env: gym.Env, n: int):
        assert env.spec is not None and env.spec.max_episode_steps is not None, "a registered id with a time limit"
        self.n = n
        self.observation_space = env.observation_space
        self.action_space = cast(gym.spaces.Discrete, env.action_space)
        self.max_episode_steps = env.spec.max_episode_steps
        self.elapsed = np.zeros(n, np.int64)
        self.started = np.zeros(n, bool)
        self.all_slots = np.arange(n)

    def reset(self, slots: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        """Reset slots[j] as `env.reset(seed=seeds[j])` does; their observations, [len(slots), ...]."""
        slots, seeds = np.asarray(slots), np.asarray(seeds)
        if (
            slots.ndim != 1
            or seeds.shape != slots.shape
            or slots.dtype.kind not in "iu"
            or seeds.dtype.kind not in "iu"
        ):
            raise ValueError(
                f"reset takes 1-D integer slots and seeds of one length, not {slots.shape} and {seeds.shape}"
            )
        self.elapsed[slots] = 0
        self.started[slots] = True
        return self._start(slots, seeds)

    def step(
        self, actions: np.ndarray, slots: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Every slot's `env.step(actions[i])`, or slots[j]'s `env.step(actions[j])` (distinct slots)."""
        actions = np.asarray(actions)
        if slots is None:
            slots = self.all_slots
        else:
            slots = np.asarray(slots)
            if slots.ndim != 1 or slots.dtype.kind not in "iu" or len(np.unique(slots)) != len(slots):
                raise ValueError(f"step takes distinct 1-D integer slots, not {slots.dtype} {slots.shape}")
        if actions.shape != slots.shape or actions.dtype.kind not in "iu":
            raise ValueError(
                f"step takes {len(slots)} integer actions, one a slot, not {actions.dtype} {actions.shape}"
            )
        if len(slots) == 0:
            raise ValueError("step takes at least one slot")
        if actions.min() < 0 or actions.max() >= self.action_space.n:
            raise ValueError(f"actions lie in 0..{self.action_space.n - 1}, not {actions.min()}..{actions.max()}")
        if not self.started[slots].all():
            raise ValueError("reset every slot before the first step")
        observations, rewards, terminated = self._advance(slots, actions)
        self.elapsed[slots] += 1
        return observations, rewards, terminated, self.elapsed[slots] >= self.max_episode_steps

    def _start(self, slots: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _advance(self, slots: np.ndarray, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Step slots[j] with actions[j]; their observations, rewards and terminations."""
        raise NotImplementedError


def generators(seeds: np.ndarray) -> list[np.random.Generator]:
    """The `env.np_random` that `env.reset(seed=s)` makes, for each seed."""
    return [seeding.np_random(seed)[0] for seed in seeds.tolist()]


class BatchedFrozenLake(BatchedSimulator):
    """FrozenLake (any map, slippery or not) with one-hot observations (the `one_hot` wrapper).

    The library draws one uniform per step (and one per reset) from the env's generator, slippery or not, and
    picks a transition by `argmax(cumsum(probabilities) > u)`. Generator.random(k) gives the same k numbers as k
    calls, so each slot draws UNIFORMS_AHEAD at a time and the step reads them from its row. Where every
    transition and the start are certain (a lake that is not slippery), no draw decides anything: no generator."""

    LIBRARY_ENV = FrozenLakeEnv
    WRAPPERS = ("one_hot",)
    STATE_KEY = "toy_text_state"
    PAYS_FROM = 2  # 0.69x the library's steps per CPU-second at 1 slot, 1.42x at 2
    UNIFORMS_AHEAD = 64

    def __init__(self, env: gym.Env, n: int):
        super().__init__(env, n)
        lake: Any = env.unwrapped  # FrozenLakeEnv's model: P[s][a] = [(probability, next state, reward, terminated)]
        states, actions = lake.observation_space.n, lake.action_space.n
        width = max(len(lake.P[s][a]) for s in range(states) for a in range(actions))
        # cumulative probabilities as the library sums them; -inf past a list's end is never above u
        self.cumulative = np.full((states, actions, width), -np.inf)
        self.next_state = np.zeros((states, actions, width), np.int64)
        self.reward = np.zeros((states, actions, width))
        self.terminates = np.zeros((states, actions, width), bool)
        for s in range(states):
            for a in range(actions):
                probabilities, next_states, rewards, terminates = zip(*lake.P[s][a])
                listed = slice(0, len(probabilities))
                self.cumulative[s, a, listed] = np.cumsum(probabilities)
                self.next_state[s, a, listed], self.reward[s, a, listed] = next_states, rewards
                self.terminates[s, a, listed] = terminates
        self.start_cumulative = np.cumsum(lake.initial_state_distrib)
        self.drawing = width > 1 or np.count_nonzero(lake.initial_state_distrib) > 1
        self.rngs: list[np.random.Generator | None] = [None] * n  # each slot's env.np_random, where drawing
        self.one_hot = np.eye(states, dtype=np.float32)
        self.state = np.zeros(n, np.int64)  # what env.unwrapped.s holds (env.state_key toy_text_state)
        self.uniforms = np.zeros((n, self.UNIFORMS_AHEAD))
        self.drawn = np.zeros(n, np.int64)  # uniforms used of each slot's row

    def _refill(self, slots: np.ndarray) -> None:
        for slot in slots.tolist():
            self.uniforms[slot] = cast(np.random.Generator, self.rngs[slot]).random(self.UNIFORMS_AHEAD)
        self.drawn[slots] = 0

    def _draw(self, slots: np.ndarray) -> np.ndarray:
        """The next uniform of each slot's generator."""
        self._refill(slots[self.drawn[slots] == self.UNIFORMS_AHEAD])
        uniforms = self.uniforms[slots, self.drawn[slots]]
        self.drawn[slots] += 1
        return uniforms

    def _start(self, slots: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        if self.drawing:
            for slot, rng in zip(slots.tolist(), generators(seeds)):
                self.rngs[slot] = rng
            self._refill(slots)
            self.state[slots] = np.argmax(self.start_cumulative > self._draw(slots)[:, None], axis=1)
        else:
            self.state[slots] = np.argmax(self.start_cumulative > 0)
        return self.one_hot[self.state[slots]]

    def _advance(self, slots: np.ndarray, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        state = self.state[slots]
        if self.drawing:
            u = self._draw(slots)
            k = np.argmax(self.cumulative[state, actions] > u[:, None], axis=1)
        else:
            k = np.zeros(len(slots), np.int64)  # the only transition, where none is drawn
        outcome = (state, actions, k)
        self.state[slots] = self.next_state[outcome]
        return self.one_hot[self.state[slots]], self.reward[outcome], self.terminates[outcome]


def power2(x: np.ndarray) -> np.ndarray:
    """x**2 as the library's scalar `np.float64 ** 2` computes it: C pow(x, 2), which differs from x * x (numpy's
    array x**2) in ~0.1 % of values, as does np.power's SIMD pow; float_power with a scalar exponent calls pow."""
    return np.float_power(x, 2.0)


class BatchedAcrobot(BatchedSimulator):
    """Acrobot (book or NIPS dynamics, the env's dt, masses, lengths, velocity bounds): one RK4 step of every slot
    on [4, N] float64 state rows, every floating-point operation in the library's order. Its scalar arithmetic is
    IEEE double, as numpy's elementwise arrays are; its np.sin/np.cos on one float64 gave the same bits as numpy's
    array loops (and math's) on 200,000 values here (AVX-512 EPYC, numpy 2.4); its `x**2` on one float64 is C pow,
    which array arithmetic is not (`power2`)."""

    LIBRARY_ENV = AcrobotEnv
    WRAPPERS = ()
    PAYS_FROM = 4  # 0.21x at 1 slot, 0.42x at 2, 1.00x at 4, 1.75x at 8
    STATE_KEY = None
    START_BOUND = 0.1  # reset draws the 4 state values uniform in (-0.1, 0.1), the library's default bounds

    def __init__(self, env: gym.Env, n: int):
        super().__init__(env, n)
        acrobot: Any = env.unwrapped
        if acrobot.torque_noise_max > 0:
            raise ValueError("the batched Acrobot replays no torque noise (torque_noise_max > 0)")
        self.nips = acrobot.book_or_nips == "nips"
        self.dt = acrobot.dt
        self.torques = np.asarray(acrobot.AVAIL_TORQUE, np.float64)
        self.max_velocity = np.array([[acrobot.MAX_VEL_1], [acrobot.MAX_VEL_2]])  # a column: rows dtheta1, dtheta2
        m1, m2, l1 = acrobot.LINK_MASS_1, acrobot.LINK_MASS_2, acrobot.LINK_LENGTH_1
        lc1, lc2, g = acrobot.LINK_COM_POS_1, acrobot.LINK_COM_POS_2, 9.8  # g: a constant in the library's dynamics
        inertia1 = inertia2 = acrobot.LINK_MOI
        # the library's constant subexpressions, folded left to right as Python evaluates them there
        self.m2, self.inertia1, self.inertia2 = m2, inertia1, inertia2
        self.d1_base, self.d1_sum, self.d1_cos = m1 * lc1**2, l1**2 + lc2**2, 2 * l1 * lc2
        self.d2_base, self.d2_cos = lc2**2, l1 * lc2
        self.phi2_cos = m2 * lc2 * g
        self.phi1_square, self.phi1_cross, self.phi1_cos = -m2 * l1 * lc2, 2 * m2 * l1 * lc2, (m1 * lc1 + m2 * l1) * g
        self.book_square = m2 * l1 * lc2
        self.denominator_base = m2 * lc2**2 + inertia2
        self.state = np.zeros((4, n))  # theta1, theta2, dtheta1, dtheta2: rows, so each is contiguous

    def _start(self, slots: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        low, high = -self.START_BOUND, self.START_BOUND
        draws = [rng.uniform(low=low, high=high, size=(4,)) for rng in generators(seeds)]
        start = np.array(draws).astype(np.float32).T.copy()
        self.state[:, slots] = start
        return self._observe(start)  # float32 sin/cos: the library's reset observes its float32 state

    @staticmethod
    def _observe(state: np.ndarray) -> np.ndarray:
        theta1, theta2, dtheta1, dtheta2 = state
        features = (np.cos(theta1), np.sin(theta1), np.cos(theta2), np.sin(theta2), dtheta1, dtheta2)
        return np.stack(features, axis=1).astype(np.float32)

    def _derivatives(self, y: np.ndarray, torque: np.ndarray) -> np.ndarray:
        theta1, theta2, dtheta1, dtheta2 = y
        cos2, sin2 = np.cos(theta2), np.sin(theta2)
        d1 = self.d1_base + self.m2 * (self.d1_sum + self.d1_cos * cos2) + self.inertia1 + self.inertia2
        d2 = self.m2 * (self.d2_base + self.d2_cos * cos2) + self.inertia2
        phi2 = self.phi2_cos * np.cos(theta1 + theta2 - math.pi / 2.0)
        phi1 = (
            self.phi1_square * power2(dtheta2) * sin2
            - self.phi1_cross * dtheta2 * dtheta1 * sin2
            + self.phi1_cos * np.cos(theta1 - math.pi / 2)
            + phi2
        )
        numerator = torque + d2 / d1 * phi1
        if not self.nips:
            numerator = numerator - self.book_square * power2(dtheta1) * sin2
        ddtheta2 = (numerator - phi2) / (self.denominator_base - power2(d2) / d1)
        ddtheta1 = -(d2 * ddtheta2 + phi1) / d1
        return np.stack((dtheta1, dtheta2, ddtheta1, ddtheta2))

    def _advance(self, slots: np.ndarray, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        torque, y0 = self.torques[actions], self.state[:, slots]
        half, dt = self.dt / 2.0, self.dt
        k1 = self._derivatives(y0, torque)
        k2 = self._derivatives(y0 + half * k1, torque)
        k3 = self._derivatives(y0 + half * k2, torque)
        k4 = self._derivatives(y0 + dt * k3, torque)
        state = y0 + dt / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)
        angles = state[:2]
        while (np.abs(angles) > math.pi).any():  # wrap into [-pi, pi] by whole turns, one at a time as the library
            above, below = angles > math.pi, angles < -math.pi
            angles[above] -= 2 * math.pi
            angles[below] += 2 * math.pi
        np.minimum(np.maximum(state[2:], -self.max_velocity), self.max_velocity, out=state[2:])
        self.state[:, slots] = state
        terminated = -np.cos(state[0]) - np.cos(state[1] + state[0]) > 1.0
        return self._observe(state), np.where(terminated, 0.0, -1.0), terminated


SIMULATORS: tuple[type[BatchedSimulator], ...] = (BatchedFrozenLake, BatchedAcrobot)


def batched_simulator(env_cfg: EnvSettings, n: int, collection: bool = False) -> BatchedSimulator:
    """N slots of the env `make_env(env_cfg, collection=collection)` builds, on its batched simulator. Raises a
    one-line ValueError for an env or wrappers no simulator here replays."""
    env = make_env(env_cfg, collection=collection)
    try:
        simulator = next((s for s in SIMULATORS if type(env.unwrapped) is s.LIBRARY_ENV), None)
        if simulator is None:
            names = ", ".join(s.LIBRARY_ENV.__name__ for s in SIMULATORS)
            raise ValueError(f"no batched simulator replays env.id={env_cfg.id} (there are: {names})")
        if tuple(env_cfg.wrappers) != simulator.WRAPPERS:
            replayed, given = list(simulator.WRAPPERS), list(env_cfg.wrappers)
            raise ValueError(f"the batched {env_cfg.id} replays env.wrappers={replayed}, not {given}")
        return simulator(env, n)
    finally:
        env.close()


def simulator_if_any(env_cfg: EnvSettings, n: int, collection: bool = False) -> BatchedSimulator | None:
    """batched_simulator's N slots where it pays (N >= its PAYS_FROM); None where no simulator here replays the env,
    or N slots are too few for it: then the envs step one by one, to the same bits."""
    try:
        simulator = batched_simulator(env_cfg, n, collection)
    except ValueError:
        return None
    return simulator if n >= simulator.PAYS_FROM else None
