"""A stable-baselines3 PPO model as record_influence's first two arguments (policy, module), for scoring
your own SB3 buffers:

    records = sb3_records(model.rollout_buffer, model.action_space, model.device)
    scores = record_influence(*sb3_policy(model), records)
"""

from __future__ import annotations

from collections.abc import Callable

from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.policies import ActorCriticPolicy
from torch.distributions import Distribution

from rlinfluence.records import Observations


def torch_distribution(policy: ActorCriticPolicy, obs: Observations) -> Distribution:
    """SB3's own distribution of the actions at `obs` (its preprocessing and heads), as a torch Distribution."""
    distribution = policy.get_distribution(obs).distribution
    if not isinstance(distribution, Distribution):  # a list of them: MultiDiscrete, MultiBinary
        raise TypeError(f"SB3's {type(policy.action_dist).__name__} is not one torch Distribution (not supported)")
    return distribution


def sb3_policy(
    model: BaseAlgorithm | ActorCriticPolicy,
) -> tuple[Callable[[Observations], Distribution], ActorCriticPolicy]:
    """(policy, module) of an SB3 PPO model or its actor-critic policy: obs -> its action distribution, and
    the policy module itself; TypeError for anything else (recurrent policies are not supported)."""
    policy = model.policy if isinstance(model, BaseAlgorithm) else model
    if not isinstance(policy, ActorCriticPolicy):
        raise TypeError(f"sb3_policy takes an SB3 PPO model or an ActorCriticPolicy, not {type(model).__name__}")
    return (lambda obs: torch_distribution(policy, obs)), policy
