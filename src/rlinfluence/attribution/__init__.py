"""Influence of the records of any on-policy buffer on a target, for any torch policy (the public API).

    scores = record_influence(policy, module, records)   # one float per record, ⟨∇ℓ_i(θ), ∇L_f(θ)⟩
    dropped = drop_set(scores, p=50)                     # IIF: the most negative ⌊n_neg·p/100⌋ record ids

The task (which target, which records) and the attributor (forward-mode scoring along ∇L_f) are
the ones our own trainer uses: `influence.directional_scores` and `losses.policy_loss_per_record`.
"""

from rlinfluence.attribution.drop import DROP_MODES, drop_set
from rlinfluence.attribution.scores import TARGETS, record_influence

__all__ = ["DROP_MODES", "TARGETS", "drop_set", "record_influence"]
