"""MiniGrid's Empty rooms with the agent's view looked up instead of redrawn on every step.

Stock MiniGrid builds the 7x7 egocentric view from scratch after every action: it slices the
grid into a new `Grid` of fresh `Wall` objects, rotates it cell by cell once per heading, runs the
occlusion sweep and encodes the result, all in Python, which dominates a MiniGrid run's time, most
of it in the evaluation's episodes (measured: benchmarks/README.md). In an Empty room nothing but
the agent ever changes: there is nothing to pick up, drop or toggle, so the grid stays as `reset`
drew it and the view is a function of the agent's pose (cell, heading) alone.

`FastViewEmptyEnv` therefore asks the library's own `gen_obs` for a pose's view the first time the
agent is there and then returns a copy of it: every image is one the library computed, for the same
grid and pose. The memo is keyed by the grid's encoding, so a reset that draws another grid (another
size, a moved goal) starts a new one; the agent carrying something (impossible in an Empty room) goes
to the library every time.

Each `MiniGrid-Empty-*` id is registered again as `rlinfluence.envs.minigrid_view:<id>-fast` with the same
arguments. tests/envs/test_envs.py checks observations, rewards and episode ends step by step against the
library's env; benchmarks/minigrid_speed.py measures the speed-up.
"""

from __future__ import annotations

import gymnasium as gym
import minigrid  # noqa: F401  (registers the library's ids, which are copied below)
import numpy as np
from minigrid.envs import EmptyEnv

LIBRARY_ENTRY_POINT = "minigrid.envs:EmptyEnv"


class FastViewEmptyEnv(EmptyEnv):
    _memo_grid: tuple[object, bytes] | None = None  # (the grid the memo was made for, its encoding)
    _memo_views: dict[tuple[int, int, int], np.ndarray]

    def gen_obs(self) -> dict:
        if self.carrying is not None:
            return super().gen_obs()
        if self._memo_grid is None or self._memo_grid[0] is not self.grid:
            self._start_memo()
        pose = (int(self.agent_pos[0]), int(self.agent_pos[1]), int(self.agent_dir))
        view = self._memo_views.get(pose)
        if view is None:
            view = self._memo_views[pose] = super().gen_obs()["image"]
        return {"image": view.copy(), "direction": self.agent_dir, "mission": self.mission}

    def _start_memo(self) -> None:
        """A reset made a new grid object: keep the views only if it is the same room as before."""
        encoding = self.grid.encode().tobytes()
        if self._memo_grid is None or self._memo_grid[1] != encoding:
            self._memo_views = {}
        self._memo_grid = (self.grid, encoding)


for _spec in list(gym.registry.values()):
    if _spec.entry_point == LIBRARY_ENTRY_POINT:
        gym.register(id=f"{_spec.id}-fast", entry_point=FastViewEmptyEnv, kwargs=dict(_spec.kwargs))
