"""SB3's rollout buffer, whose minibatches skip the records dropped this round."""

from __future__ import annotations

from collections.abc import Generator

import numpy as np
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.type_aliases import RolloutBufferSamples

# What SB3's RolloutBuffer.get flattens before drawing minibatches (its own list, same order).
_FLATTENED = ("observations", "actions", "values", "log_probs", "advantages", "returns")


class IIFRolloutBuffer(RolloutBuffer):
    """`PPO(..., rollout_buffer_class=IIFRolloutBuffer)`. Until `drop` is called in a round, `get` is
    SB3's own (same minibatches, same RNG draws); after it, each epoch shuffles only the kept records
    into minibatches of `batch_size` (the last one may be smaller), with numpy's global RNG as SB3 does.

    Record ids are SB3's flat order: env-major, id = env_index * n_steps + step (`swap_and_flatten`)."""

    kept_ids: np.ndarray | None = None

    def reset(self) -> None:
        super().reset()
        self.kept_ids = None

    def drop(self, ids: np.ndarray) -> None:
        keep = np.ones(self.buffer_size * self.n_envs, bool)
        keep[ids] = False
        self.kept_ids = np.flatnonzero(keep)

    def get(self, batch_size: int | None = None) -> Generator[RolloutBufferSamples, None, None]:
        if self.kept_ids is None:
            yield from super().get(batch_size)
            return
        if not self.generator_ready:
            for name in _FLATTENED:
                self.__dict__[name] = self.swap_and_flatten(self.__dict__[name])
            self.generator_ready = True
        order = np.random.permutation(self.kept_ids)
        size = batch_size or len(order)
        for start in range(0, len(order), size):
            yield self._get_samples(order[start : start + size])
