"""highway-v0 with its Kinematics observation built by numpy instead of pandas.

The library assembles each 5x5 observation through DataFrames: about 40 % of a highway-v0 step
(vehicles_count 10, 5 Hz). `NumpyKinematics` builds the same rows with numpy and normalises them
with the library's own `normalize_obs`, so observations are bit-identical (tests/test_envs.py).
highway-env has no registry of observation types, so the env is a subclass that picks ours in
`define_spaces`, registered as `rlinfluence.highway:highway-v0-numpy-obs`; the library is untouched.
Importing this module imports highway-env (and pandas): only `gym.make` of that id does.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from highway_env.envs.common.observation import KinematicObservation
from highway_env.envs.highway_env import HighwayEnv


class NumpyKinematics(KinematicObservation):
    def observe(self) -> np.ndarray:
        if not self.env.road:
            return super().observe()
        ego = self.observer_vehicle
        others = self.env.road.close_objects_to(
            ego, self.env.PERCEPTION_DISTANCE, count=self.vehicles_count - 1, see_behind=self.see_behind,
            sort=self.order == "sorted", vehicles_only=not self.include_obstacles)
        origin = ego if not self.absolute else None
        rows = [ego.to_dict()] + [v.to_dict(origin, observe_intentions=self.observe_intentions)
                                  for v in others[-self.vehicles_count + 1:]]
        columns = {f: np.array([row[f] for row in rows], np.float64) for f in self.features}
        if self.normalize:  # the present rows only; missing rows are zero-padded after, as upstream
            columns = self.normalize_obs(columns)
        obs = np.zeros((self.vehicles_count, len(self.features)))
        obs[:len(rows)] = np.stack([columns[f] for f in self.features], axis=1)
        if self.order == "shuffled":
            self.env.np_random.shuffle(obs[1:])
        return obs.astype(self.space().dtype)


class NumpyKinematicsHighwayEnv(HighwayEnv):
    def define_spaces(self) -> None:
        super().define_spaces()
        if type(self.observation_type) is KinematicObservation:  # other observation types stay as they are
            self.observation_type = NumpyKinematics(self, **self.config["observation"])
            self.observation_space = self.observation_type.space()


gym.register(id="highway-v0-numpy-obs", entry_point=NumpyKinematicsHighwayEnv)
