"""The fast influence path must equal the definition, for every policy architecture."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlinfluence.config import NetworkConfig, PPOConfig
from rlinfluence.influence import _Attribution, influence_scores, reference_scores
from rlinfluence.networks import ActorCritic
from rlinfluence.records import RolloutBuffer
from rlinfluence.targets import ActionTarget, ReturnTarget

N = 48

ARCHITECTURES = {
    "mlp-categorical": (gym.spaces.Box(0, 1, (16,), np.float32), gym.spaces.Discrete(4), NetworkConfig()),
    "cnn-categorical": (gym.spaces.Box(0, 255, (3, 7, 7), np.uint8), gym.spaces.Discrete(7),
                        NetworkConfig(kind="cnn", features_dim=64)),
    "mlp-gaussian": (gym.spaces.Box(-5, 5, (24,), np.float32), gym.spaces.Box(-1, 1, (4,), np.float32),
                     NetworkConfig()),
}


def make_case(name: str, seed: int = 0) -> tuple[ActorCritic, RolloutBuffer]:
    obs_space, action_space, net = ARCHITECTURES[name]
    generator = torch.Generator().manual_seed(seed)
    model = ActorCritic(obs_space, action_space, net, generator)
    if obs_space.dtype == np.uint8:
        obs = torch.randint(0, 256, (N, *obs_space.shape), generator=generator, dtype=torch.uint8)
    else:
        obs = torch.randn((N, *obs_space.shape), generator=generator)
    with torch.no_grad():
        head_out, values = model(obs)
        actions = model.action_head.sample(head_out, model.action_head.draw_noise((N,), generator))
        log_probs = model.action_head.log_prob(head_out, actions)
    advantages = torch.randn(N, generator=generator)
    zeros = torch.zeros(N)
    buffer = RolloutBuffer(obs=obs, actions=actions, log_probs=log_probs, values=values, rewards=zeros, dones=zeros,
                           advantages=advantages, returns=advantages + values, deltas=zeros,
                           env_index=zeros.long(), step=torch.arange(N))
    return model, buffer


@pytest.mark.parametrize("name", list(ARCHITECTURES))
@pytest.mark.parametrize("ent_coef", [0.0, 0.01])
def test_jvp_scores_match_per_record_autograd(name, ent_coef):
    model, buffer = make_case(name)
    ppo = PPOConfig(ent_coef=ent_coef)
    fast = influence_scores(model, buffer, ReturnTarget(), ppo, chunk_size=20)  # several chunks
    slow = reference_scores(model, buffer, ReturnTarget(), ppo)
    scale = slow.abs().max()
    assert scale > 0
    assert (fast - slow).abs().max() <= 1e-5 * scale
    assert (slow < 0).any() and (slow > 0).any()  # a case where the sign actually matters


def test_action_target_matches_reference():
    model, buffer = make_case("mlp-categorical")
    target = ActionTarget(state=[1.0] + [0.0] * 15, action=[2])
    fast = influence_scores(model, buffer, target, PPOConfig())
    slow = reference_scores(model, buffer, target, PPOConfig())
    assert (fast - slow).abs().max() <= 1e-5 * slow.abs().max()


@pytest.mark.parametrize("name", ["mlp-categorical", "mlp-gaussian"])
def test_positive_score_means_a_step_on_the_record_lowers_the_target_loss(name):
    """First-order meaning of the score: θ ← θ − η∇ℓ_i changes L_f by ≈ −η·I_i."""
    model, buffer = make_case(name, seed=3)
    ppo, target, eta = PPOConfig(), ReturnTarget(), 1e-3
    scores = influence_scores(model, buffer, target, ppo)
    attribution = _Attribution(model, buffer, target, ppo)
    for i in (int(scores.argmax()), int(scores.argmin())):
        params = {k: v.clone().requires_grad_(True) for k, v in attribution.params.items()}
        grads = torch.autograd.grad(attribution.per_record_loss(params, torch.tensor([i]))[0], list(params.values()))
        stepped = {k: v.detach() - eta * g for (k, v), g in zip(params.items(), grads)}
        before = target.loss(attribution.policy_fn(attribution.params), buffer)
        after = target.loss(attribution.policy_fn(stepped), buffer)
        assert torch.isclose(after - before, -eta * scores[i], rtol=0.05, atol=1e-9)


def test_value_head_is_not_attributed():
    model, _ = make_case("cnn-categorical")
    names = model.policy_parameter_names()
    assert any(n.startswith("features.") for n in names)  # the shared CNN is part of the policy
    assert not any(n.startswith(("vf_body.", "value_head.")) for n in names)
