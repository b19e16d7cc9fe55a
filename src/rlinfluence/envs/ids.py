"""Env ids that name the same simulator as another id, so that a run made under one counts as made under
the other (run/identity.py's check) and a command may still give the older one.

- Our simulators' modules moved into envs/ (the package's layer folders): `rlinfluence.highway:<id>` is
  `rlinfluence.envs.highway:<id>` and `rlinfluence.minigrid_view:<id>` is `rlinfluence.envs.minigrid_view:<id>`.
- A library env id that a preset has since replaced by a simulator of ours which replays the library's env
  step for step (observations, rewards, episode ends; tests/envs/test_envs.py).
"""

from __future__ import annotations

MOVED_MODULES = {
    "rlinfluence.highway:": "rlinfluence.envs.highway:",
    "rlinfluence.minigrid_view:": "rlinfluence.envs.minigrid_view:",
}
SAME_SIMULATOR = {"minigrid:MiniGrid-Empty-8x8-v0": "rlinfluence.envs.minigrid_view:MiniGrid-Empty-8x8-v0-fast"}


def current_id(env_id: str) -> str:
    """The id gym.make knows today for a simulator that an older id of ours named."""
    for old, new in MOVED_MODULES.items():
        if env_id.startswith(old):
            return new + env_id[len(old) :]
    return env_id


def simulator_id(env_id: str) -> str:
    """The id of the simulator `env_id` runs: runs on two ids with the same simulator id are the same runs."""
    return SAME_SIMULATOR.get(current_id(env_id), current_id(env_id))
