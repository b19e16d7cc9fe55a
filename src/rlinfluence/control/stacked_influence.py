"""Round-start influence for N stacked seeds, each seed's records scored at its own θ_k: influence.py's
scores (I_i = ⟨∇ℓ_i(θ_k), ∇L_f(θ_k)⟩, policy parameters only, Â normalised over the seed's buffer, P = I)
with its `gradient` and its forward-mode `directional_scores` run once over the whole stack.

Seed k's losses depend on θ_k alone, so the gradient of the seeds' summed target losses is each seed's own
target gradient, and one JVP of the stacked per-record losses along the stacked directions is each seed's
own directional derivatives: no seed's scores mix with another's.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.func import functional_call

from rlinfluence.config.schema import PPOConfig
from rlinfluence.control.stacked_networks import StackedActorCritic
from rlinfluence.influence import Params, directional_scores, gradient
from rlinfluence.losses import normalize_advantages, policy_loss_per_record
from rlinfluence.records import RolloutBuffer
from rlinfluence.targets import Target


class _StackedPolicy(nn.Module):
    """(obs, actions, seeds) -> (log π(a|s), entropy) [seeds, records], callable with substituted parameters."""

    def __init__(self, model: StackedActorCritic):
        super().__init__()
        self.model = model

    def forward(
        self, obs: torch.Tensor, actions: torch.Tensor, seeds: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return self.model.log_prob_entropy(self.model.policy_output(obs, seeds), actions, seeds)


def stacked_influence_scores(
    model: StackedActorCritic, buffers: list[RolloutBuffer], target: Target, ppo: PPOConfig, chunk_size: int = 4096
) -> torch.Tensor:
    """[seeds, records]: row k is influence.influence_scores of seed k's network on buffers[k]."""
    if len(buffers) != model.n_seeds or len({len(buffer) for buffer in buffers}) != 1:
        raise ValueError(f"{len(buffers)} buffers (of sizes {[len(b) for b in buffers]}) for {model.n_seeds} seeds")
    buffers = [buffer.to(model.device) for buffer in buffers]  # the run's device, where its target scores them too
    policy = _StackedPolicy(model)
    # The policy's parameters (ActorCritic.policy_parameter_names'): the value path's are not attributed.
    params: Params = {
        name: p.detach()
        for name, p in policy.named_parameters()
        if name.startswith(("model.features.", "model.pi_body.", "model.action_head."))
    }
    obs = torch.stack([buffer.obs for buffer in buffers])
    actions = torch.stack([buffer.actions for buffer in buffers])
    advantages = torch.stack([normalize_advantages(buffer.advantages) for buffer in buffers])

    def seed_policy(p: Params, k: int):
        """Seed k's (obs, actions) -> (log π, entropy), as the target asks of a policy."""
        seed = torch.tensor([k], device=model.device)
        return lambda o, a: tuple(out[0] for out in functional_call(policy, p, (o.unsqueeze(0), a.unsqueeze(0), seed)))

    def target_losses(p: Params) -> torch.Tensor:
        losses = (target.loss(seed_policy(p, k), buffer) for k, buffer in enumerate(buffers))
        return sum(losses, torch.zeros((), device=model.device))

    direction = gradient(target_losses, params)
    with torch.no_grad():
        old_log_prob = functional_call(policy, params, (obs, actions, None))[0]

    def per_record_loss(p: Params, ids: slice | torch.Tensor) -> torch.Tensor:
        """[records, seeds]: directional_scores stacks its chunks along the records."""
        log_prob, entropy = functional_call(policy, p, (obs[:, ids], actions[:, ids], None))
        losses = policy_loss_per_record(
            log_prob, old_log_prob[:, ids], advantages[:, ids], ppo.clip_range, entropy, ppo.ent_coef
        )
        return losses.T

    return directional_scores(per_record_loss, params, direction, len(buffers[0]), chunk_size).T
