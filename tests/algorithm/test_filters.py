"""Issue 46's filter arms: gradient consensus (method=consensus), whole-episode drops
(method.granularity=episode), random at 25 % (method=random25) and the DoorKey preset (env=doorkey)."""

from __future__ import annotations

import re
import sys

import gymnasium as gym
import numpy as np
import pytest
import torch

from conftest import compose_config, config_refusal, metrics_rows
from rlinfluence import cli
from rlinfluence.config.schema import NetworkConfig, PPOConfig
from rlinfluence.control.networks import ActorCritic
from rlinfluence.influence import influence_scores
from rlinfluence.losses import normalize_advantages, policy_loss_per_record
from rlinfluence.records import RolloutBuffer, episode_ids
from rlinfluence.run.rundir import relative_run_dir
from rlinfluence.selection import EPISODE, DropAgainstConsensus, DropMostNegative, episodes_to_drop, make_selection
from rlinfluence.share import FilterShare
from rlinfluence.targets import UpdateLossTarget


def tiny_case(n: int = 40, seed: int = 0) -> tuple[ActorCritic, RolloutBuffer]:
    """A small MLP policy on 16-dim observations with 4 actions, and a buffer of `n` records it sampled
    (random advantages; the dones are set by the tests that need episodes)."""
    generator = torch.Generator().manual_seed(seed)
    obs_space, action_space = gym.spaces.Box(0, 1, (16,), np.float32), gym.spaces.Discrete(4)
    model = ActorCritic(obs_space, action_space, NetworkConfig(), generator)
    obs = torch.randn((n, 16), generator=generator)
    with torch.no_grad():
        head_out, values = model(obs)
        actions = model.action_head.sample(head_out, model.action_head.draw_noise((n,), generator))
        log_probs = model.action_head.log_prob(head_out, actions)
    advantages = torch.randn(n, generator=generator)
    zeros = torch.zeros(n)
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
        step=torch.arange(n),
    )
    return model, buffer


def per_record_gradients(model: ActorCritic, buffer: RolloutBuffer, ppo: PPOConfig) -> torch.Tensor:
    """∇ℓ_i over the policy parameters, one autograd pass per record, flattened: (N, n_params). Written from
    the definition, without influence.py: ℓ_i is the PPO loss with π_old = π_θk and Â normalised over the buffer."""
    named = dict(model.named_parameters())
    params = [named[name] for name in model.policy_parameter_names()]
    advantages = normalize_advantages(buffer.advantages)
    rows = []
    for i in range(len(buffer)):
        log_prob, entropy = model.action_head.log_prob_entropy(
            model.policy_output(buffer.obs[i : i + 1]), buffer.actions[i : i + 1]
        )
        loss = policy_loss_per_record(
            log_prob, log_prob.detach(), advantages[i : i + 1], ppo.clip_range, entropy, ppo.ent_coef
        )[0]
        grads = torch.autograd.grad(loss, params, allow_unused=True)
        rows.append(torch.cat([(torch.zeros_like(p) if g is None else g).reshape(-1) for p, g in zip(params, grads)]))
    return torch.stack(rows)


# ----------------------------------------------------------------------------- method=consensus


@pytest.mark.parametrize("ent_coef", [0.0, 0.01])
def test_consensus_scores_are_each_record_s_gradient_against_the_mean_one(ent_coef):
    model, buffer = tiny_case()
    ppo = PPOConfig(ent_coef=ent_coef)
    gradients = per_record_gradients(model, buffer, ppo)
    reference = gradients @ gradients.mean(0)  # ⟨∇ℓ_i, ḡ⟩, ḡ the mean of the records' own gradients
    fast = influence_scores(model, buffer, UpdateLossTarget(ppo.clip_range, ppo.ent_coef), ppo, chunk_size=16)
    scale = reference.abs().max()
    assert (reference < 0).any() and (reference > 0).any()  # some records oppose the consensus
    assert (fast - reference).abs().max() <= 1e-5 * scale
    # Σ_i c_i = N ‖ḡ‖²: the records agree on average, by construction
    assert float(fast.sum()) == pytest.approx(len(buffer) * float(gradients.mean(0).square().sum()), rel=1e-4)


def test_consensus_drops_iif_s_count_of_its_most_negative_scores(tiny_config):
    method = make_selection(tiny_config("method=consensus"))
    assert isinstance(method, DropAgainstConsensus) and method.p == FilterShare(50)
    assert method.scored_target(object()) == UpdateLossTarget(0.2, 0.0)  # not the agent's target
    scores = np.array([0.5, -3.0, -1.0, 2.0, -1.0, -0.2, 0.1])
    dropped = np.flatnonzero(~method.select(np.zeros(7), scores, np.random.default_rng(0)).keep)
    assert dropped.tolist() == [1, 2]  # ⌊4 · 50 / 100⌋ = 2, most negative first, the tie (ids 2, 4) by id


# ----------------------------------------------------------------------------- method.granularity=episode


def episode_buffer() -> RolloutBuffer:
    """Two envs of 8 steps each, env-major: env 0 ends episodes at steps 2 and 5, env 1 at step 3."""
    _, buffer = tiny_case(16)
    dones = torch.zeros(16)
    dones[[2, 5, 8 + 3]] = 1
    buffer.dones, buffer.env_index, buffer.step = dones, torch.arange(16) // 8, torch.arange(16) % 8
    return buffer


def test_episode_ids_restart_after_each_done_and_at_each_env_s_first_step():
    assert episode_ids(episode_buffer()).tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4]


def test_episode_drops_remove_whole_episodes_the_nearest_to_iif_s_count():
    buffer = episode_buffer()
    # episode sums: 0: -3 (3 records), 1: -0.5 (3), 2: +1 (2), 3: -6 (4), 4: -0.4 (4)
    scores = np.array([-1, -1, -1, -0.5, 0.5, -0.5, 0.5, 0.5, -2, -2, -1, -1, 0.2, -0.2, -0.2, -0.2])
    method = DropMostNegative(FilterShare(50), EPISODE)
    keep = method.select(buffer, scores, np.random.default_rng(0)).keep
    # IIF's count: 12 negative records at 50 % = 6. Candidates most negative first: 3 (4 records), 0 (3),
    # 1 (3), 4 (4); prefix totals 0, 4, 7, 10, 14: 7 is the nearest to 6, so episodes 3 and 0 go.
    assert np.flatnonzero(~keep).tolist() == [0, 1, 2, 8, 9, 10, 11]


@pytest.mark.parametrize("seed", range(5))
def test_episode_drops_are_a_prefix_of_the_negative_episodes_within_half_an_episode_of_the_count(seed):
    rng = np.random.default_rng(seed)
    episodes = np.repeat(np.arange(30), rng.integers(1, 12, 30))
    scores = rng.normal(size=episodes.size)
    count = int(rng.integers(0, episodes.size // 2))
    dropped = episodes_to_drop(episodes, scores, count)
    sums, lengths = np.bincount(episodes, weights=scores), np.bincount(episodes)
    gone = np.unique(episodes[dropped])
    assert all(dropped[episodes == e].all() for e in gone)  # whole episodes only
    assert (sums[gone] < 0).all()
    kept_negative = np.setdiff1d(np.flatnonzero(sums < 0), gone)
    if gone.size and kept_negative.size:
        assert sums[gone].max() <= sums[kept_negative].min()  # the most negative ones
    if kept_negative.size:  # the negative episodes did not run out: rounded to the nearest boundary
        boundary = kept_negative[np.argmin(sums[kept_negative])]
        assert abs(int(dropped.sum()) - count) <= lengths[boundary] / 2


# ----------------------------------------------------------------------------- config: tags, refusals


def test_record_granularity_leaves_every_existing_run_dir_as_it_was():
    for overrides, leaf in (
        (["method=iif"], "iif-p50"),
        (["method=iif", "method.granularity=record"], "iif-p50"),
        (["method=iif_auto"], "iif-pauto"),
        (["method=iif_guard"], "iif_guard-p50"),
        (["method=iif", "method.granularity=episode"], "iif-ep-p50"),
        (["method=consensus"], "consensus-p50"),
        (["method=consensus", "method.granularity=episode", "env=minigrid"], "consensus-ep-p12.5"),
        (["method=random25"], "random-p25"),
        (["method=random", "method.p=25"], "random-p25"),
    ):
        assert relative_run_dir(compose_config(overrides)).parent.name == leaf, overrides


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["method.granularity=episodes"], "method.granularity='episodes' is not one of: record, episode"),
        (
            ["method=ppo", "method.granularity=episode"],
            "method.granularity=episode does not apply to method=ppo; it is for method=iif, consensus",
        ),
        (
            ["method=iif_guard", "method.granularity=record"],
            "method.granularity=record does not apply to method=iif_guard; it is for method=iif, consensus",
        ),
        (["method=consensus", "method.p=auto"], "method.p=auto must be in (0, 100] (percent of negative-influence"),
        (["method=consensus", "target=action"], "target=action does not apply to method=consensus"),
        (
            ["env=toxicity_tiny", "method=iif", "method.granularity=episode"],
            "method.granularity=episode needs the control agent's episodes; env=toxicity_tiny (env.agent=lm)",
        ),
    ],
)
def test_bad_filter_settings_are_refused_in_one_line_naming_the_key(overrides, message):
    assert config_refusal(*overrides).startswith(message)


# ----------------------------------------------------------------------------- training through the CLI


def run_cli(monkeypatch, *arguments: str) -> None:
    monkeypatch.setattr(sys, "argv", ["rlinfluence", *arguments])
    cli.main()


@pytest.mark.parametrize(
    ("env", "method", "leaf"),
    [
        ("frozenlake", ["method=consensus"], r"consensus-p50-[0-9a-f]{6}"),
        ("frozenlake", ["method=iif", "method.granularity=episode"], r"iif-ep-p50-[0-9a-f]{6}"),
        ("doorkey", ["method=ppo"], r"ppo-[0-9a-f]{6}"),
    ],
)
def test_the_new_arms_train_two_rounds_through_the_cli(tmp_path, monkeypatch, env, method, leaf):
    runs = tmp_path / "runs"
    run_cli(monkeypatch, "debug=smoke", f"env={env}", *method, f"runs_root={runs}")
    (run_dir,) = (runs / "default" / env).glob("*/*/seed0")  # doorkey: adam
    assert re.fullmatch(leaf, run_dir.parent.name)  # the hash: debug=smoke's budget
    assert (run_dir / "DONE").exists()
    rows = metrics_rows(run_dir)
    assert [row["round"] for row in rows] == ["0", "1", "2"]
    for row in rows[1:]:
        n, kept = int(row["n_records"]), int(row["n_kept"])
        if method == ["method=consensus"]:  # IIF's count on its own negatives: ⌊n_neg · 50 / 100⌋
            assert kept == n - int(np.floor(float(row["n_negative"]) * 50 / 100))
        assert 0 < kept <= n
