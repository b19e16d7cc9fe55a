"""One root seed, independent named streams.

Every source of randomness (network init, each env, action sampling, selection, minibatch
shuffling, evaluation) gets its own child of `numpy.random.SeedSequence(seed)`, so adding a new
consumer never shifts the numbers another one sees, and adjacent root seeds share no stream.
"""

from __future__ import annotations

import numpy as np
import torch

# The order is part of the reproducibility contract: append new streams at the end only.
STREAMS = (
    "network",
    "train_envs",
    "actions",
    "selection",
    "shuffle",
    "eval",
    "influence_partition",
    "prompts",
    "val_generation",
    "corruption",
)


def spawn_streams(seed: int) -> dict[str, np.random.SeedSequence]:
    children = np.random.SeedSequence(seed).spawn(len(STREAMS))
    return dict(zip(STREAMS, children))


def child_stream(stream: np.random.SeedSequence, index: int) -> np.random.SeedSequence:
    """Child `index` of `stream` (round k's, a pass's), a function of the two alone: a resumed run draws
    what an uninterrupted one does, which `SeedSequence.spawn` (it counts its calls) would not give."""
    return np.random.SeedSequence(stream.entropy, spawn_key=(*stream.spawn_key, index))


def round_seed(stream: np.random.SeedSequence, index: int) -> int:
    """A torch seed for round `index`'s sampling, from `child_stream(stream, index)`."""
    return int(child_stream(stream, index).generate_state(1)[0])


def torch_generator(seed_seq: np.random.SeedSequence) -> torch.Generator:
    generator = torch.Generator()
    generator.manual_seed(int(seed_seq.generate_state(1, dtype=np.uint64)[0] >> 1))
    return generator


def numpy_generator(seed_seq: np.random.SeedSequence) -> np.random.Generator:
    return np.random.default_rng(seed_seq)
