"""What your own PPO loop needs beside the scores (issue 57): a CleanRL agent as the API's (module, policy),
and the kept records' minibatches, none of a single record (whose advantage std is NaN)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn
from torch.distributions import Categorical, Normal

from rlinfluence.attribution import cleanrl_policy, kept_minibatches, normalize_advantages, record_influence

N = 24


def mlp(outputs: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, outputs))


class DiscreteAgent(nn.Module):
    """The attributes and the get_action_and_value contract of CleanRL's ppo.py Agent."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.critic, self.actor = mlp(1), mlp(3)

    def get_action_and_value(self, x, action=None):
        probs = Categorical(logits=self.actor(x))
        action = probs.sample() if action is None else action
        return action, probs.log_prob(action), probs.entropy(), self.critic(x)


class ContinuousAgent(nn.Module):
    """The attributes and the get_action_and_value contract of CleanRL's ppo_continuous_action.py Agent."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.critic, self.actor_mean = mlp(1), mlp(2)
        self.actor_logstd = nn.Parameter(torch.tensor([[-0.3, 0.4]]))

    def get_action_and_value(self, x, action=None):
        mean = self.actor_mean(x)
        probs = Normal(mean, self.actor_logstd.expand_as(mean).exp())
        action = probs.sample() if action is None else action
        return action, probs.log_prob(action).sum(1), probs.entropy().sum(1), self.critic(x)


def cleanrl_records(agent: DiscreteAgent | ContinuousAgent) -> dict[str, torch.Tensor]:
    obs = torch.randn(N, 4, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        actions, log_probs, _, _ = agent.get_action_and_value(obs)
    return {"observations": obs, "actions": actions, "old_log_probs": log_probs, "advantages": torch.randn(N)}


@pytest.mark.parametrize("agent_class", [DiscreteAgent, ContinuousAgent])
def test_cleanrl_policy_is_the_agents_own_distribution(agent_class):
    agent = agent_class()
    records = cleanrl_records(agent)
    policy, module = cleanrl_policy(agent)
    distribution = policy(records["observations"])
    _, log_prob, entropy, _ = agent.get_action_and_value(records["observations"], records["actions"])
    sums = (lambda x: x.sum(1)) if agent_class is ContinuousAgent else (lambda x: x)
    torch.testing.assert_close(sums(distribution.log_prob(records["actions"])), log_prob)
    torch.testing.assert_close(sums(distribution.entropy()), entropy)
    assert all(value is dict(agent.named_parameters())[name] for name, value in module.named_parameters())
    assert not any(name.startswith("critic") for name, _ in module.named_parameters())


def test_the_continuous_agent_is_scored_over_actor_mean_and_actor_logstd():
    """Issue 57: with actor_mean as the module, actor_logstd was a constant and the scores were off."""
    agent = ContinuousAgent()
    records = cleanrl_records(agent)
    scores = record_influence(*cleanrl_policy(agent), records)
    actor = [name for name, _ in agent.named_parameters() if name.startswith("actor")]
    written_out = record_influence(  # the agent's lines copied, every actor parameter named: the reference
        lambda obs: Normal(agent.actor_mean(obs), agent.actor_logstd.expand_as(agent.actor_mean(obs)).exp()),
        agent,
        records,
        parameters=actor,
    )
    np.testing.assert_allclose(scores, written_out, rtol=1e-5, atol=1e-9)
    mean_only = record_influence(  # what the copied lines scored with actor_mean alone
        lambda obs: Normal(agent.actor_mean(obs), agent.actor_logstd.expand_as(agent.actor_mean(obs)).exp()),
        agent,
        records,
        parameters=[name for name in actor if name.startswith("actor_mean")],
    )
    assert np.abs(scores - mean_only).max() > 1e-3 * np.abs(scores).max()


def test_cleanrl_policy_refuses_another_agent_in_one_line():
    atari = DiscreteAgent()
    atari.network = nn.Linear(4, 4)  # ppo_atari's shared trunk, which get_action_and_value feeds x / 255 to
    with pytest.raises(TypeError, match=r"cleanrl_policy takes CleanRL's MLP PPO agents .*not DiscreteAgent"):
        cleanrl_policy(atari)


@pytest.mark.parametrize(("n_kept", "sizes"), [(9, [4, 5]), (10, [4, 4, 2]), (8, [4, 4]), (3, [3]), (0, [])])
def test_kept_minibatches_never_hold_a_single_record(n_kept, sizes):
    """Issue 57: CleanRL's range(0, len(ids), minibatch_size) over 9 kept ids left a 1-record last minibatch,
    whose advantage std is NaN (a crash in Normal(loc=nan))."""
    kept = np.arange(100, 100 + n_kept)
    batches = kept_minibatches(kept, 4, np.random.default_rng(0))
    assert [len(ids) for ids in batches] == sizes
    assert sorted(np.concatenate([kept[:0], *batches]).tolist()) == kept.tolist()
    advantages = torch.randn(200)
    assert all(torch.isfinite(advantages[ids].std()) for ids in batches)


def test_kept_minibatches_take_a_seed_and_refuse_what_would_give_a_nan_std():
    kept = np.arange(50)
    assert all(np.array_equal(a, b) for a, b in zip(kept_minibatches(kept, 8, 3), kept_minibatches(kept, 8, 3)))
    with pytest.raises(ValueError, match=r"minibatch_size=1 must be an int >= 2"):
        kept_minibatches(kept, 1)
    with pytest.raises(ValueError, match="kept_ids holds a single record"):
        kept_minibatches([7], 4)
    with pytest.raises(ValueError, match=r"kept_ids must be a 1-D array of record ids \(ints\)"):
        kept_minibatches(np.zeros(4), 4)


def test_normalize_advantages_is_public_and_leaves_one_record_finite():
    assert torch.equal(normalize_advantages(torch.tensor([2.5])), torch.tensor([2.5]))
    normalized = normalize_advantages(torch.tensor([1.0, 2.0, 3.0]))
    torch.testing.assert_close(normalized, torch.tensor([-1.0, 0.0, 1.0]), atol=1e-6, rtol=0)


@pytest.mark.parametrize("shape", [(), (8, 4), (2, 3, 4)])
def test_normalize_advantages_refuses_anything_but_one_minibatchs_vector(shape):
    """A [time, envs] buffer would be normalised whole or per row depending on a guess: the caller flattens it."""
    with pytest.raises(ValueError, match=rf"a 1-D tensor; got shape {re.escape(str(shape))}"):
        normalize_advantages(torch.ones(shape))


def test_the_cleanrl_style_example_trains_with_the_public_helpers():
    """examples/cleanrl_style_influence.py: cleanrl_policy, kept_minibatches and normalize_advantages, from the
    public API only, one iteration."""
    example = Path(__file__).resolve().parents[2] / "examples" / "cleanrl_style_influence.py"
    assert "rlinfluence.losses" not in example.read_text()  # the non-public helper it used to need
    result = subprocess.run(
        [sys.executable, str(example), "--total-timesteps", "512"], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert re.fullmatch(r"iteration 1: .* records dropped \(\d+% of the batch\)\n", result.stdout), result.stdout
