"""Invariants of the public attribution API for any valid input (hypothesis), each derived in docs/api.md
("Properties"): a plausible bug in the scoring or the drop set fails at least one of them."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from hypothesis import given, settings, strategies as st

from rlinfluence.attribution import drop_set, record_influence

# Each example builds a tiny policy and scores a few dozen records: a handful of examples per property.
PROPERTY = settings(max_examples=20, deadline=None, derandomize=True)


@st.composite
def buffers(draw, min_records: int = 3, max_records: int = 24):
    """A Categorical MLP policy and records with distinct raw advantages (a random seed draws the floats)."""
    n = draw(st.integers(min_records, max_records))
    seed = draw(st.integers(0, 2**16))
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))

    def policy(obs):
        return torch.distributions.Categorical(logits=net(obs))

    obs = torch.randn(n, 4, generator=generator)
    actions = torch.randint(0, 3, (n,), generator=generator)
    with torch.no_grad():
        old_log_probs = policy(obs).log_prob(actions)
    advantages = torch.randn(n, generator=generator) * draw(st.floats(0.1, 10.0))
    records = {"observations": obs, "actions": actions, "old_log_probs": old_log_probs, "advantages": advantages}
    return net, policy, records


def close(a: np.ndarray, b: np.ndarray, rtol: float = 1e-4) -> None:
    np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol * max(np.abs(b).max(), 1e-12))


@PROPERTY
@given(buffers(), st.randoms(use_true_random=False))
def test_permuting_the_records_permutes_the_scores(buffer, rand):
    """Normalising Â and the f_return mean are symmetric in the records: score(π·R) = π·score(R)."""
    net, policy, records = buffer
    order = list(range(len(records["advantages"])))
    rand.shuffle(order)
    permuted = {key: value[order] for key, value in records.items()}
    close(record_influence(policy, net, permuted), record_influence(policy, net, records)[order])


@PROPERTY
@given(buffers(), st.integers(0, 2**16))
def test_a_records_score_is_its_normalised_advantage_times_a_term_of_its_own(buffer, seed):
    """At θ_k (ratio 1, no entropy) ∇ℓ_i = −Â_i ∇log π(a_i|s_i) with Â normalised over the buffer, so on a
    target that does not read advantages (f_action) score_i / Â_i depends on (s_i, a_i) only: two
    advantage vectors A, B give score_A · Â_B = score_B · Â_A record by record."""
    net, policy, records = buffer
    other = torch.randn(len(records["advantages"]), generator=torch.Generator().manual_seed(seed))
    target: dict[str, Any] = {"target": "action", "target_state": np.full(4, 0.3), "target_action": 1}
    score_a = record_influence(policy, net, records, **target)
    score_b = record_influence(policy, net, records | {"advantages": other}, **target)

    def normalised(adv):
        return ((adv - adv.mean()) / (adv.std() + 1e-8)).double().numpy()

    close(score_a * normalised(other), score_b * normalised(records["advantages"]), rtol=1e-3)


@PROPERTY
@given(buffers(), st.floats(-3.0, 3.0), st.floats(-3.0, 3.0))
def test_scores_are_linear_in_the_target(buffer, a, b):
    """I_i = ⟨∇ℓ_i, ∇L_f⟩ is linear in L_f: the scores on a·L_1 + b·L_2 are a·scores_1 + b·scores_2."""
    net, policy, records = buffer
    obs, actions = records["observations"], records["actions"]

    def loss_on(ids):
        def loss(params):
            logits = torch.func.functional_call(net, params, (obs[ids],))
            return -torch.distributions.Categorical(logits=logits).log_prob(actions[ids]).mean()

        return loss

    first, second = loss_on(slice(0, 2)), loss_on(slice(1, None))
    combined = record_influence(policy, net, records, lambda params: a * first(params) + b * second(params))
    separate = a * record_influence(policy, net, records, first) + b * record_influence(policy, net, records, second)
    np.testing.assert_allclose(combined, separate, rtol=1e-3, atol=1e-5 * max(np.abs(separate).max(), 1e-9))


@PROPERTY
@given(buffers(), st.sampled_from(["column", "numpy", "float64", "sb3 actions"]))
def test_scores_do_not_depend_on_the_layout_the_inputs_came_in(buffer, layout):
    net, policy, records = buffer
    changed = {
        "column": lambda r: r | {"advantages": r["advantages"][:, None], "old_log_probs": r["old_log_probs"][:, None]},
        "numpy": lambda r: {k: v.numpy() for k, v in r.items()},
        "float64": lambda r: {k: v.double() if v.is_floating_point() else v for k, v in r.items()},
        "sb3 actions": lambda r: r | {"actions": r["actions"][:, None].float()},
    }[layout](records)
    close(record_influence(policy, net, changed), record_influence(policy, net, records), rtol=1e-5)


@PROPERTY
@given(
    st.lists(st.floats(-1e3, 1e3, allow_nan=False), min_size=1, max_size=60),
    st.floats(0.01, 100.0),
    st.integers(0, 2**16),
)
def test_drop_set_drops_the_documented_count_of_the_most_negative_scores(values, p, seed):
    """iif drops exactly ⌊n_neg·p/100⌋ ids, all with negative scores, none less negative than a kept negative
    one; random drops the same count of distinct ids; none drops nothing."""
    scores = np.array(values)
    negative = scores < 0
    count = int(np.floor(negative.sum() * p / 100))
    dropped = drop_set(scores, p)
    assert len(dropped) == count and len(set(dropped.tolist())) == count
    assert negative[dropped].all()
    kept_negative = np.setdiff1d(np.flatnonzero(negative), dropped)
    if count and kept_negative.size:
        assert scores[dropped].max() <= scores[kept_negative].min()
    at_random = drop_set(scores, p, "random", np.random.default_rng(seed))
    assert len(at_random) == count and len(np.unique(at_random)) == count
    assert drop_set(scores, p, "none").size == 0
