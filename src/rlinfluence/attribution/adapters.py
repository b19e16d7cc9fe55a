"""CleanRL's PPO agents as record_influence's first two arguments (policy, module), so nobody copies the
agent's lines:

    scores = record_influence(*cleanrl_policy(agent), records)

CleanRL's `Agent` offers `get_action_and_value(x, action)`, which samples and returns log-probs, not the
Distribution record_influence needs. Its MLP agents build that distribution from their actor alone: ppo.py's
`Categorical(logits=actor(x))`, ppo_continuous_action.py's `Normal(actor_mean(x), exp(actor_logstd))`. The
module returned holds those very parameters (shared, never copied; named as in the agent), so every parameter
the policy reads is attributed through, `actor_logstd` included. (`rlinfluence.sb3.sb3_policy` does the same
for stable-baselines3.)
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.distributions import Categorical, Distribution, Normal

from rlinfluence.records import Observations


class _Actor(nn.Module):
    """The actor's parts of a CleanRL agent, under the agent's own names; the critic is left out."""

    actor: nn.Module  # ppo.py
    actor_mean: nn.Module  # ppo_continuous_action.py, with actor_logstd
    actor_logstd: torch.Tensor


def cleanrl_policy(agent: nn.Module) -> tuple[Callable[[Observations], Distribution], nn.Module]:
    """(policy, module) of a CleanRL MLP PPO agent: `actor` (discrete actions) or `actor_mean` and
    `actor_logstd` (continuous); TypeError for any other agent."""
    actor = _Actor()
    mean_head, log_std, head = (getattr(agent, name, None) for name in ("actor_mean", "actor_logstd", "actor"))
    if isinstance(mean_head, nn.Module) and isinstance(log_std, nn.Parameter):
        actor.actor_mean, actor.actor_logstd = mean_head, log_std

        def gaussian(obs: Observations) -> Distribution:
            mean = actor.actor_mean(obs)  # read through `actor`: record_influence substitutes its parameters
            return Normal(mean, actor.actor_logstd.expand_as(mean).exp())

        return gaussian, actor
    if isinstance(head, nn.Module) and not hasattr(agent, "network"):
        actor.actor = head
        return (lambda obs: Categorical(logits=actor.actor(obs))), actor
    raise TypeError(
        f"cleanrl_policy takes CleanRL's MLP PPO agents (ppo.py's `actor`; ppo_continuous_action.py's `actor_mean` "
        f"and `actor_logstd`), not {type(agent).__name__}; for another agent (ppo_atari's `network` trunk) pass "
        "record_influence a function obs -> Distribution and a module holding every parameter it reads"
    )
