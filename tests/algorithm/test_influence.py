"""The fast influence path must equal the definition, for every policy architecture."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlinfluence.config.schema import NetworkConfig, PPOConfig
from rlinfluence.control.networks import ActorCritic
from rlinfluence.influence import StepInfluence, _Attribution, adam_preconditioner, influence_scores, reference_scores
from rlinfluence.losses import policy_loss_per_record
from rlinfluence.records import RolloutBuffer
from rlinfluence.selection import Selection
from rlinfluence.targets import ActionTarget, ReturnTarget

N = 48

ARCHITECTURES: dict[str, tuple[gym.spaces.Box, gym.spaces.Space, NetworkConfig]] = {
    "mlp-categorical": (gym.spaces.Box(0, 1, (16,), np.float32), gym.spaces.Discrete(4), NetworkConfig()),
    "cnn-categorical": (
        gym.spaces.Box(0, 255, (3, 7, 7), np.uint8),
        gym.spaces.Discrete(7),
        NetworkConfig(kind="cnn", features_dim=64),
    ),
    "mlp-gaussian": (
        gym.spaces.Box(-5, 5, (24,), np.float32),
        gym.spaces.Box(-1, 1, (4,), np.float32),
        NetworkConfig(),
    ),
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
    buffer = RolloutBuffer(
        obs=obs,
        actions=actions,
        log_probs=log_probs,
        values=values,
        rewards=zeros,
        dones=zeros,
        advantages=advantages,
        returns=advantages + values,
        deltas=zeros,
        env_index=zeros.long(),
        step=torch.arange(N),
    )
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
    target = ActionTarget.of(state=[1.0] + [0.0] * 15, action=[2])
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


def _adam_after_steps(model: ActorCritic, buffer: RolloutBuffer, steps: int) -> torch.optim.Adam:
    """An Adam optimizer whose state holds `steps` real PPO-loss steps (as after earlier rounds)."""
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-5)
    attribution = _Attribution(model, buffer, ReturnTarget(), PPOConfig())
    for _ in range(steps):
        optimizer.zero_grad()
        params = dict(model.named_parameters())
        loss = attribution.per_record_loss(
            {f"model.{n}": params[n] for n in model.policy_parameter_names()}, slice(None)
        ).mean()
        loss.backward()
        optimizer.step()
    return optimizer


@pytest.mark.parametrize("name", ["mlp-categorical", "cnn-categorical", "mlp-gaussian"])
def test_adam_preconditioned_scores_match_an_explicit_computation(name):
    """⟨P ∇ℓ_i, ∇L_f⟩ with P = 1/(√v̂ + ε) read off Adam's state by hand, record by record."""
    model, buffer = make_case(name, seed=1)
    optimizer = _adam_after_steps(model, buffer, steps=3)
    named = dict(model.named_parameters())
    by_hand = {}
    for n in model.policy_parameter_names():
        state = optimizer.state[named[n]]
        v_hat = state["exp_avg_sq"] / (1 - 0.999 ** int(state["step"]))  # torch's default β2
        by_hand[f"model.{n}"] = 1.0 / (torch.sqrt(v_hat) + 1e-5)
    preconditioner = adam_preconditioner(model, optimizer)
    assert preconditioner is not None and all(torch.allclose(preconditioner[k], p) for k, p in by_hand.items())
    fast = influence_scores(model, buffer, ReturnTarget(), PPOConfig(), chunk_size=20, preconditioner=preconditioner)
    slow = reference_scores(model, buffer, ReturnTarget(), PPOConfig(), preconditioner=by_hand)
    assert (fast - slow).abs().max() <= 1e-5 * slow.abs().max()
    plain = influence_scores(model, buffer, ReturnTarget(), PPOConfig())
    assert (torch.argsort(fast) != torch.argsort(plain)).any()  # preconditioning re-ranks records


def test_adam_preconditioner_is_none_before_the_first_step():
    model, buffer = make_case("mlp-categorical")
    assert adam_preconditioner(model, _adam_after_steps(model, buffer, steps=0)) is None


def test_adam_preconditioning_runs_in_a_round_and_needs_adam(tmp_path):
    from conftest import compose_config
    from rlinfluence.choices import ConfigError
    from rlinfluence.cli import run_task

    with pytest.raises(ConfigError, match=r"influence.preconditioner=adam needs optimizer=adam"):
        run_task(compose_config(["debug=smoke", "influence.preconditioner=adam"]), tmp_path / "sgd")
    cfg = compose_config(["debug=smoke", "influence.preconditioner=adam", "optimizer=adam", "env=acrobot"])
    assert run_task(cfg, tmp_path / "adam")["rounds_completed"] == 2  # round 1 without Adam state, 2 with it


def test_every_step_influence_matches_an_explicit_loop_over_the_update():
    """Σ_j η ⟨∇ℓ_i(θ_j), ∇L_f(θ_j)⟩ over a real 3-epoch update, each term by per-record autograd."""
    from conftest import one_network_update

    model, buffer = make_case("mlp-categorical", seed=2)
    ppo, target, lr = PPOConfig(batch_size=16, n_epochs=3), ReturnTarget(), 0.5
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    step_influence = StepInfluence(model, buffer, target, ppo, lr)
    explicit = torch.zeros(N, dtype=torch.float64)
    policy_names = [f"model.{n}" for n in model.policy_parameter_names()]

    def both(ids, advantages):
        step_influence.add_step(ids, advantages)
        named = dict(model.named_parameters())
        params = {k: named[k.removeprefix("model.")].detach().clone().requires_grad_(True) for k in policy_names}
        attribution = _Attribution(model, buffer, target, ppo)
        target_grads = torch.autograd.grad(target.loss(attribution.policy_fn(params), buffer), list(params.values()))
        for position, i in enumerate(ids.tolist()):
            log_prob, entropy = attribution.policy_fn(params)(buffer.obs[i : i + 1], buffer.actions[i : i + 1])
            loss = policy_loss_per_record(
                log_prob,
                buffer.log_probs[i : i + 1],
                advantages[position : position + 1].detach(),
                ppo.clip_range,
                entropy,
                ppo.ent_coef,
            )[0]
            grads = torch.autograd.grad(loss, list(params.values()))
            explicit[i] += lr * float(sum((g * t).sum() for g, t in zip(grads, target_grads)))

    stats = one_network_update(
        model, optimizer, buffer, Selection(np.ones(N, bool)), ppo, np.random.default_rng(0), both
    )
    assert stats["gradient_steps"] == 3 * N // 16
    assert stats["clip_fraction"] > 0  # later steps move the ratio: the live clip is part of the check
    assert torch.allclose(step_influence.scores, explicit, rtol=0, atol=1e-6 * float(explicit.abs().max()))


def test_every_step_influence_only_measures_it_never_changes_the_run(tmp_path):

    from conftest import compose_config, metrics_rows
    from rlinfluence.cli import run_task

    def rows(name, *overrides):
        run_task(compose_config(["debug=smoke", "env=acrobot", "method=iif", *overrides]), tmp_path / name)
        return metrics_rows(tmp_path / name, timings=False)

    def results(table):
        return [{k: v for k, v in r.items() if not k.startswith("influence_")} for r in table]

    plain, measured = rows("round_start"), rows("every_step", "influence.checkpoints=every_step")
    assert results(plain) == results(measured)
    agreement = [float(r["influence_step_spearman"]) for r in measured[1:]]
    assert all(-1 <= a <= 1 for a in agreement) and all(r["influence_step_spearman"] == "nan" for r in plain)
