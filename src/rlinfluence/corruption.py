"""Planted bad data (corruption.*): which of a round's records are corrupted, how, and how well a run finds them.

Each round k plants a random subset of exactly round(fraction · n) record ids, drawn from round k's child
of the `corruption` stream (seeding.py): it consumes no other stream, so the rest of a corrupted run draws
what a clean run draws, and a resumed run plants the records an uninterrupted one does. The kinds:

    advantage_sign  the control agent negates the planted records' GAE advantages Â after GAE: records
                    that push the policy the wrong way, nothing else about them changed
    reward          the control agent negates their env rewards before GAE (a noisy reward: GAE spreads
                    the error to the records before them, which are not planted; harder to find). The
                    language-model agent negates the reward model's score of the planted responses.

The round loop measures, per round, how well the run's drop set and scores find them
(metrics.planted_detection); run/logger.py writes it with the planted ids to the run dir's corruption.jsonl.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rlinfluence.metrics import planted_detection
from rlinfluence.records import PlantedRecords, Records, RolloutBuffer
from rlinfluence.seeding import child_stream, spawn_streams
from rlinfluence.selection import Selection, advantage_agreement

ADVANTAGE_SIGN, REWARD = "advantage_sign", "reward"
KINDS = (ADVANTAGE_SIGN, REWARD)
LM_KINDS = (REWARD,)  # a language-model record's advantage is per token: it plants noisy reward scores only


def plants(fraction: float) -> bool:
    """Whether a run plants corrupted records (corruption.fraction > 0): the one test of it. Within a
    round, the records say it (their `planted` mask, None in a clean run)."""
    return fraction > 0


def planted_records(seed: int, k: int, n_records: int, fraction: float) -> torch.Tensor | None:
    """Round k's planted records: a bool mask over the record ids, true for exactly round(fraction · n)
    of them; None in a clean run (it draws nothing)."""
    if not plants(fraction):
        return None
    rng = np.random.default_rng(child_stream(spawn_streams(seed)["corruption"], k))
    planted = torch.zeros(n_records, dtype=torch.bool)
    planted[rng.choice(n_records, size=round(fraction * n_records), replace=False)] = True
    return planted


def negate_planted_advantages(buffer: RolloutBuffer) -> None:
    """kind=advantage_sign, after GAE: Â of the planted records changes sign. Their value targets (returns)
    stay as collected: the critic keeps learning true values, so the corruption stays in this round's
    policy gradient instead of reaching the next rounds' advantages through V."""
    assert buffer.planted is not None
    buffer.advantages[buffer.planted] *= -1


def advantage_heuristic_scores(records: Records, gamma: float) -> np.ndarray | None:
    """Ā·Â, Monte-Carlo against GAE advantage: the agreement the advantage heuristics rank by
    (selection.DropAdvantageMismatch; low: the record's Â looks wrong), where Monte-Carlo advantages exist
    (a control buffer over discrete states and actions); None elsewhere."""
    if not isinstance(records, RolloutBuffer) or records.state_keys is None or records.actions.ndim != 1:
        return None
    return advantage_agreement(records, gamma)[2]


def round_detection(
    records: PlantedRecords, selection: Selection, scores: np.ndarray | None, gamma: float
) -> dict[str, Any]:
    """The round's planted ids and how well its drop set, influence `scores` and the advantage
    heuristics find them (metrics.planted_detection)."""
    assert records.planted is not None
    planted = records.planted.cpu().numpy()
    detection = planted_detection(planted, ~selection.keep, scores, advantage_heuristic_scores(records, gamma))
    return detection | {"planted": np.flatnonzero(planted).tolist()}
