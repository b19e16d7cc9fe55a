"""The paper's baselines (App. B.4, B.5): Monte-Carlo advantage heuristics H1/H2 and TD-error
PER-style reweighting; what they compute, what they drop or reweight, and how they fail on envs
they cannot run on."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from conftest import compose_config, config_refusal, one_network_rollout
from rlinfluence.choices import ConfigError
from rlinfluence.control.collect import TrainEnvs
from rlinfluence.control.networks import ActorCritic
from rlinfluence.figures.arms import ADVANTAGE_H1, ADVANTAGE_H2, TD_ERROR
from rlinfluence.records import RolloutBuffer, discounted_returns_to_go
from rlinfluence.run.rundir import method_tag
from rlinfluence.selection import (
    DropAdvantageMismatch,
    TDErrorReweighting,
    make_selection,
    monte_carlo_advantages,
    rank_priorities,
)
from rlinfluence.share import FilterShare
from rlinfluence.update import minibatch_ids
from rlinfluence.validation import validate

GAMMA = 0.5  # exact in binary: hand-computed returns compare exactly


def make_buffer(rewards, dones, *, values=None, deltas=None, state_keys=None, actions=None, advantages=None):
    """A (T, n_envs) rollout laid out env-major, as the collector stores it."""
    rewards = np.asarray(rewards, np.float32)
    T, n_envs = rewards.shape

    def flat(x, dtype=np.float32):
        return torch.as_tensor(np.swapaxes(np.asarray(x, dtype), 0, 1).reshape(-1))

    zeros = np.zeros_like(rewards)
    values = zeros if values is None else values
    return RolloutBuffer(
        obs=torch.zeros(T * n_envs, 1),
        actions=flat(zeros if actions is None else actions),
        log_probs=flat(zeros),
        values=flat(values),
        rewards=flat(rewards),
        dones=flat(dones),
        advantages=flat(zeros if advantages is None else advantages),
        returns=flat(zeros),
        deltas=flat(zeros if deltas is None else deltas),
        env_index=flat(np.tile(np.arange(n_envs), (T, 1)), np.int64),
        step=flat(np.tile(np.arange(T)[:, None], (1, n_envs)), np.int64),
        state_keys=None if state_keys is None else flat(state_keys, np.int64),
    )


# ---------------------------------------------------------------- Monte-Carlo returns and advantages


def test_returns_to_go_stop_at_episode_ends_and_bootstrap_at_the_buffer_end():
    # env 0: episode ends at t=1, then a new one runs past the buffer end with V(s_T) = 8.
    # env 1: one episode ends exactly at the last step (nothing to bootstrap).
    rewards = [[1, 0], [2, 0], [0, 0], [4, 1]]
    dones = [[0, 0], [1, 0], [0, 0], [0, 1]]
    values = [[0, 0], [0, 0], [0, 0], [3, 5]]
    # δ at the last step = r + γV(s_T)(1 − done) − V(s): the buffer's own record of V(s_T).
    deltas = [[0, 0], [0, 0], [0, 0], [4 + GAMMA * 8 - 3, 1 - 5]]
    buffer = make_buffer(rewards, dones, values=values, deltas=deltas)
    returns = discounted_returns_to_go(buffer, GAMMA)
    env0 = [1 + GAMMA * 2, 2, GAMMA * (4 + GAMMA * 8), 4 + GAMMA * 8]
    env1 = [GAMMA**3, GAMMA**2, GAMMA, 1]
    np.testing.assert_allclose(returns, env0 + env1, rtol=1e-6)  # env-major record ids


def test_monte_carlo_advantage_is_q_minus_v_from_the_buffer_alone():
    # One env, every step its own episode (done), so return = reward. State 7 seen with actions 0, 0, 1.
    rewards = [[1], [3], [8], [5]]
    buffer = make_buffer(rewards, [[1]] * 4, state_keys=[[7], [7], [7], [9]], actions=[[0], [0], [1], [2]])
    v7 = (1 + 3 + 8) / 3
    expected = [2 - v7, 2 - v7, 8 - v7, 0.0]  # Q(7,0) = 2, Q(7,1) = 8; state 9 seen once: no evidence
    np.testing.assert_allclose(monte_carlo_advantages(buffer, GAMMA), expected, rtol=1e-6, atol=1e-12)


def test_monte_carlo_advantages_on_a_real_frozenlake_buffer_match_a_plain_loop():
    cfg = compose_config(["env=frozenlake"])
    envs = TrainEnvs(cfg.env, np.random.SeedSequence(0))
    model = ActorCritic(envs.observation_space, envs.action_space, cfg.env.network, torch.Generator().manual_seed(0))
    buffer = one_network_rollout(model, envs, 512, 0.99, 0.95, torch.Generator().manual_seed(0))
    rewards, dones = buffer.rewards.numpy(), buffer.dones.numpy()
    with torch.no_grad():
        bootstrap = float(model.value(torch.as_tensor(envs.obs)))
    returns, running = np.zeros(len(buffer)), bootstrap  # one env: record id = step
    for t in reversed(range(len(buffer))):
        running = rewards[t] + 0.99 * running * (1 - dones[t])
        returns[t] = running
    np.testing.assert_allclose(discounted_returns_to_go(buffer, 0.99), returns, rtol=1e-4, atol=1e-5)
    assert buffer.state_keys is not None  # FrozenLake's
    states, actions = buffer.state_keys.numpy(), buffer.actions.numpy()
    expected = [
        returns[(states == s) & (actions == a)].mean() - returns[states == s].mean() for s, a in zip(states, actions)
    ]
    np.testing.assert_allclose(monte_carlo_advantages(buffer, 0.99), expected, rtol=1e-4, atol=1e-5)
    assert buffer.dones.sum() > 10 and (np.abs(expected) > 1e-6).any()


# ---------------------------------------------------------------- H1 / H2


def heuristic_case():
    """Ā from returns (each step its own episode); Â chosen to make 4 sign mismatches."""
    rewards = [[0.0], [1.0], [0.0], [1.0], [0.0], [2.0], [0.0], [3.0]]
    keys = [[0], [0], [1], [1], [2], [2], [3], [3]]  # state k seen with actions 0 (return 0) and 1
    actions = [[0], [1], [0], [1], [0], [1], [0], [1]]
    gae = [[0.1], [0.2], [0.4], [-0.1], [2.0], [-3.0], [-1.0], [0.0]]
    buffer = make_buffer(rewards, [[1]] * 8, state_keys=keys, actions=actions, advantages=gae)
    # Ā = ∓r/2: [-0.5, 0.5, -0.5, 0.5, -1, 1, -1.5, 1.5]; mismatched: ids 0, 2, 3, 4, 5 (7 has Â = 0).
    return buffer


def test_h1_drops_the_largest_advantage_gaps_among_sign_mismatches():
    buffer = heuristic_case()
    mc = monte_carlo_advantages(buffer, GAMMA)
    np.testing.assert_allclose(mc, [-0.5, 0.5, -0.5, 0.5, -1, 1, -1.5, 1.5])
    # |Ā − Â| over mismatches: id0 0.6, id2 0.9, id3 0.6, id4 3.0, id5 4.0 → p = 60 %: ⌊5·0.6⌋ = 3 dropped.
    selection = DropAdvantageMismatch("h1", FilterShare(60), GAMMA).select(buffer, None, np.random.default_rng(0))
    assert np.flatnonzero(~selection.keep).tolist() == [2, 4, 5]


def test_h2_drops_the_most_negative_advantage_products_among_sign_mismatches():
    buffer = heuristic_case()
    # Ā·Â over mismatches: id0 -0.05, id2 -0.2, id3 -0.05, id4 -2, id5 -3 → p = 40 %: ⌊5·0.4⌋ = 2 dropped.
    selection = DropAdvantageMismatch("h2", FilterShare(40), GAMMA).select(buffer, None, np.random.default_rng(0))
    assert np.flatnonzero(~selection.keep).tolist() == [4, 5]
    everything = DropAdvantageMismatch("h2", FilterShare(100), GAMMA).select(buffer, None, np.random.default_rng(0))
    assert np.flatnonzero(~everything.keep).tolist() == [0, 2, 3, 4, 5]  # never a matching-sign record


def test_advantage_config_and_run_dir_tag():
    cfg = compose_config(["env=minigrid", "method=advantage", "method.variant=h2"])
    validate(cfg)
    method = make_selection(cfg)
    assert isinstance(method, DropAdvantageMismatch)
    assert (method.variant, method.p, method.gamma) == ("h2", FilterShare(12.5), 0.99)  # the env's IIF p
    # The figure code looks runs up by these tags.
    assert method_tag(cfg.method) == ADVANTAGE_H2.tag_for("minigrid") == "advantage-h2-p12.5"
    frozenlake = compose_config(["env=frozenlake", "method=advantage", "method.variant=h1"])
    assert method_tag(frozenlake.method) == ADVANTAGE_H1.tag_for("frozenlake")


@pytest.mark.parametrize("env", ["acrobot", "lunarlander", "highway", "bipedalwalker", "pong"])
def test_advantage_on_an_env_without_discrete_states_is_a_one_line_config_error(env):
    message = config_refusal(f"env={env}", "method=advantage", "method.variant=h1")
    assert "method=advantage" in message and f"env={env}" in message
    assert message.endswith("envs that do: frozenlake, minigrid")


@pytest.mark.parametrize("variant", ["null", "h3"])
def test_advantage_needs_a_known_variant(variant):
    with pytest.raises(ConfigError, match=r"method\.variant=.* is not one of: h1, h2"):
        validate(compose_config(["env=frozenlake", "method=advantage", f"method.variant={variant}"]))


# ---------------------------------------------------------------- TD-error reweighting


def test_rank_priorities_follow_the_per_formula():
    weights = rank_priorities(np.array([0.1, -4.0, 2.0, -0.1]), alpha=0.6)
    ranks = np.array([3, 1, 2, 4])  # by |δ|, largest first; the tie at 0.1 goes to the lower id
    expected = ranks**-0.6 / (ranks**-0.6).sum()
    np.testing.assert_allclose(weights, expected)


def test_td_error_keeps_every_record_and_the_update_samples_by_weight():
    deltas = np.zeros((200, 1))
    deltas[17] = 5.0  # the largest TD error by far
    deltas[3] = -2.0  # second (sign does not matter)
    buffer = make_buffer(np.zeros((200, 1)), np.zeros((200, 1)), deltas=deltas)
    cfg = compose_config(["env=frozenlake", "method=td_error"])
    validate(cfg)
    assert method_tag(cfg.method) == TD_ERROR.tag_for("frozenlake") == "td_error"
    selection = make_selection(cfg).select(buffer, None, np.random.default_rng(0))
    assert isinstance(make_selection(cfg), TDErrorReweighting)
    assert selection.keep.all() and selection.n_kept == 200 and selection.weights is not None
    assert selection.weights.sum() == pytest.approx(1.0) and selection.weights.argmax() == 17
    # One epoch = N ids drawn with replacement by weight, in minibatches of the usual size.
    rng = np.random.default_rng(0)
    draws = np.concatenate([torch.cat(list(minibatch_ids(selection, 64, rng))).numpy() for _ in range(50)])
    assert len(draws) == 50 * 200
    counts = np.bincount(draws, minlength=200) / len(draws)
    np.testing.assert_allclose(counts[[17, 3]], selection.weights[[17, 3]], rtol=0.1)
    assert counts[17] > counts[3] > np.median(counts)
