"""Influence of the records of any on-policy buffer on a target, for any torch policy (the public API).

    scores = record_influence(policy, module, records)   # one float per record, ⟨∇ℓ_i(θ), ∇L_f(θ)⟩
    dropped = drop_set(scores, p=50)                     # IIF: the most negative ⌊n_neg·p/100⌋ record ids
    kept = np.setdiff1d(np.arange(len(scores)), dropped)
    for ids in kept_minibatches(kept, minibatch_size, rng):  # each epoch's minibatches, none of 1 record

`record_influence(*cleanrl_policy(agent), records)` scores a CleanRL agent's records (`rlinfluence.sb3.sb3_policy`:
an SB3 model's).

The task (which target, which records) and the attributor (forward-mode scoring along ∇L_f) are
the ones our own trainer uses: `influence.directional_scores` and `losses.policy_loss_per_record`.
"""

from rlinfluence.attribution.adapters import cleanrl_policy
from rlinfluence.attribution.drop import DROP_MODES, drop_set
from rlinfluence.attribution.minibatches import kept_minibatches
from rlinfluence.attribution.scores import TARGETS, record_influence
from rlinfluence.losses import normalize_advantages

__all__ = [
    "DROP_MODES",
    "TARGETS",
    "cleanrl_policy",
    "drop_set",
    "kept_minibatches",
    "normalize_advantages",
    "record_influence",
]
