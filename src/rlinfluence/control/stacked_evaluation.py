"""The control engine's evaluation: every seed's evaluation episodes of a round stepped together.

Where the env has a batched simulator (envs/batched.py: FrozenLake, Acrobot), one simulator holds every seed's
evaluation slots (seed i's n_parallel slots side by side) and one masked step advances all the episodes still
running; elsewhere each seed's Evaluator steps its library envs, seed after seed. Either way each seed plays its
Evaluator's round (control/evaluation.py's EvaluationRound: its episode seeds, its action noise) and samples its
actions with its own network on exactly the observations its Evaluator on library envs stacks, so a seed's test
return is the same on either. The forward stays one per seed: the env steps, not the forwards, are what
evaluation spends.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rlinfluence.control.evaluation import EvaluationRound
from rlinfluence.control.trainer import Trainer
from rlinfluence.envs.batched import BatchedSimulator, simulator_if_any


def simulator_for(trainers: list[Trainer]) -> BatchedSimulator | None:
    """One simulator with a slot for every seed's evaluation env; None where no simulator replays the env."""
    first = trainers[0]
    return simulator_if_any(first.cfg.env, len(trainers) * len(first.evaluator.envs))


def stacked_evaluation(trainers: list[Trainer], k: int) -> list[dict[str, Any]]:
    """Round k's evaluation of each seed, on one batched simulator where there is one, else each seed's own
    Evaluator on its library envs (Trainer.evaluate)."""
    simulator = simulator_for(trainers)
    if simulator is None:
        return [trainer.evaluate(k) for trainer in trainers]
    return simulated_evaluation(simulator, trainers, k)


@torch.no_grad()
def simulated_evaluation(simulator: BatchedSimulator, trainers: list[Trainer], k: int) -> list[dict[str, Any]]:
    """Each seed's EvaluationRound k, seed i in the simulator's slots [i * n_parallel, (i + 1) * n_parallel)."""
    rounds = [EvaluationRound(trainer.evaluator, k) for trainer in trainers]
    offsets = [i * episodes.n_slots for i, episodes in enumerate(rounds)]
    starts = [episodes.start() for episodes in rounds]  # every slot of every seed
    obs = simulator.reset(np.arange(simulator.n), np.concatenate([seeds for _, seeds in starts]))
    while True:
        live = [(i, episodes.live_slots) for i, episodes in enumerate(rounds)]
        live = [(i, seed_slots) for i, seed_slots in live if seed_slots.size]
        if not live:
            return [episodes.metrics() for episodes in rounds]
        actions = [rounds[i].actions(trainers[i].model, obs[offsets[i] + seed_slots]) for i, seed_slots in live]
        slots = np.concatenate([offsets[i] + seed_slots for i, seed_slots in live])
        stepped, rewards, terminated, truncated = simulator.step(np.concatenate(actions).astype(np.int64), slots)
        obs[slots] = stepped
        bounds = np.cumsum([seed_slots.size for _, seed_slots in live])[:-1]
        for (i, seed_slots), seed_rewards, seed_ended in zip(
            live, np.split(rewards, bounds), np.split(terminated | truncated, bounds)
        ):
            starting, seeds = rounds[i].record(seed_slots, seed_rewards, seed_ended)
            if starting.size:
                obs[offsets[i] + starting] = simulator.reset(offsets[i] + starting, seeds)
