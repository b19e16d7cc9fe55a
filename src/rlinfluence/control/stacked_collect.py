"""The control engine's collection envs: every seed's training envs on one batched simulator.

Where the env has a batched simulator (envs/batched.py: FrozenLake, Acrobot) that also holds its env.state_key,
seed i's n_envs training envs are the simulator's slots [i * n_envs, (i + 1) * n_envs) (control/collect.py's
SimulatorSlots), and one step of the simulator steps every seed's envs; each seed's TrainEnvs keeps its own episode
seeds, actions and returns, and applies its collection protocol, as with the library's envs, so its records and
checkpoint have the bits of its library envs. Elsewhere each seed's envs are the library's, stepped one by one.
"""

from __future__ import annotations

import numpy as np

from rlinfluence.control.collect import SimulatorSlots
from rlinfluence.control.trainer import Trainer
from rlinfluence.envs.batched import BatchedSimulator, simulator_if_any


def seed_slots(trainers: list[Trainer]) -> list[np.ndarray]:
    """Each seed's slots of the simulator its envs step on: seed i's n_envs from i * n_envs."""
    n_envs = trainers[0].cfg.env.n_envs
    return [np.arange(i * n_envs, (i + 1) * n_envs) for i in range(len(trainers))]


def collection_simulator(trainers: list[Trainer]) -> BatchedSimulator | None:
    """The simulator the seeds' training envs step on: the round before's while the same seeds run, else a new
    one their envs move onto (each episode in progress replayed); None where no simulator replays the env or their
    slots are too few for it to pay (envs/batched.py's PAYS_FROM): then each seed's envs step on their own, on the
    library's envs or on their slots of the simulator they moved to before."""
    slots = seed_slots(trainers)
    backends = [trainer.envs.backend for trainer in trainers]
    current = backends[0]
    if isinstance(current, SimulatorSlots) and current.simulator.n == len(trainers) * len(slots[0]):
        if all(
            isinstance(backend, SimulatorSlots)
            and backend.simulator is current.simulator
            and np.array_equal(backend.slots, seed_slot)
            for backend, seed_slot in zip(backends, slots)
        ):
            return current.simulator
    env_cfg = trainers[0].cfg.env
    simulator = simulator_if_any(env_cfg, len(trainers) * len(slots[0]), collection=True)
    if simulator is None or env_cfg.state_key not in (None, simulator.STATE_KEY):
        return None
    for trainer, seed_slot in zip(trainers, slots):
        trainer.envs.move_to(SimulatorSlots(simulator, seed_slot))
    return simulator
