"""GRPO on the language-model path (env.lm.algorithm=grpo): group advantages and the per-record loss against
hand-computed cases, IIF's per-response influence against the per-record autograd loop, a run through the
CLI, and the one-line refusals of settings GRPO cannot run with. (Resume after kill -9: test_lm.py.)"""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
import torch

from conftest import LM_GRPO, LM_TINY, compose_config, config_refusal, metrics_rows
from rlinfluence.lm.grpo import STD_EPS, group_advantages, record_losses
from rlinfluence.lm.rollout import Sequences

pytestmark = pytest.mark.usefixtures("tiny_lm_cache")

# ----------------------------------------------------------------------------- hand-computed cases

# Two groups of four: rewards with mean 3 (deviations −2, −1, 0, 3) and mean 2 (−2, −2, 2, 2).
SCORES = torch.tensor([1.0, 2.0, 3.0, 6.0, 0.0, 0.0, 4.0, 4.0])


def test_group_advantages_are_the_reward_less_the_group_mean_over_its_std():
    deviations = [-2.0, -1.0, 0.0, 3.0, -2.0, -2.0, 2.0, 2.0]
    torch.testing.assert_close(group_advantages(SCORES, 4, scale=False), torch.tensor(deviations))
    std = [math.sqrt(14 / 3)] * 4 + [math.sqrt(16 / 3)] * 4  # unbiased, as TRL's
    scaled = [d / (s + STD_EPS) for d, s in zip(deviations, std)]
    torch.testing.assert_close(group_advantages(SCORES, 4, scale=True), torch.tensor(scaled))


def test_recomputed_advantages_take_the_baseline_over_the_kept_members():
    kept = torch.tensor([True, False, True, True, True, False, False, False])
    # Group 1 keeps 1, 3, 6: mean 10/3, std² = ((7/3)² + (1/3)² + (8/3)²) / 2 = 19/3; group 2 keeps one: 0.
    deviations = [-7 / 3, 0.0, -1 / 3, 8 / 3, 0.0, 0.0, 0.0, 0.0]
    torch.testing.assert_close(group_advantages(SCORES, 4, scale=False, members=kept), torch.tensor(deviations))
    std = math.sqrt(19 / 3)
    torch.testing.assert_close(
        group_advantages(SCORES, 4, scale=True, members=kept), torch.tensor([d / (std + STD_EPS) for d in deviations])
    )
    everyone = torch.ones(8, dtype=torch.bool)
    assert torch.equal(group_advantages(SCORES, 4, True, everyone), group_advantages(SCORES, 4, True))


def test_record_loss_is_the_clipped_surrogate_plus_beta_k3_aggregated_per_record():
    # Record 0: two response tokens with advantage 2, ratios 1.5 (clipped to 1.2) and 0.5 (min is the
    # unclipped 0.5·2), π_ref = π/2 on the first; record 1: one token, advantage −1, ratio 1.1, π_ref = 2π.
    # Off-mask positions hold values that must not enter.
    mask = torch.tensor([[0.0, 1.0, 1.0, 0.0], [0.0, 1.0, 0.0, 0.0]])
    old = torch.tensor([[9.0, -1.0, -1.0, 9.0], [9.0, -2.0, 9.0, 9.0]])
    new = old + torch.log(torch.tensor([[5.0, 1.5, 0.5, 5.0], [5.0, 1.1, 5.0, 5.0]]))
    ref = new + torch.log(torch.tensor([[5.0, 0.5, 1.0, 5.0], [5.0, 2.0, 5.0, 5.0]]))
    batch = Sequences(
        input_ids=torch.zeros(2, 5, dtype=torch.long),
        attention_mask=torch.ones(2, 5, dtype=torch.long),
        mask=mask,
        scores=torch.zeros(2),
        logprobs=old,
        ref_logprobs=ref,
        advantages=torch.tensor([[7.0, 2.0, 2.0, 7.0], [7.0, -1.0, 7.0, 7.0]]),
    )
    beta = 0.1
    k3_half, k3_double = 0.5 + math.log(2) - 1, 2 - math.log(2) - 1  # exp(r) − r − 1 at r = ∓log 2
    tokens_0 = [-(1.2 * 2) + beta * k3_half, -(0.5 * 2)]
    token_1 = -(1.1 * -1) + beta * k3_double
    loss, ratio = record_losses(new, batch, clip_range=0.2, beta=beta, loss_type="grpo", max_tokens=4)
    torch.testing.assert_close(loss, torch.tensor([sum(tokens_0) / 2, token_1]))
    torch.testing.assert_close(ratio, torch.tensor([1.0, 1.1]))
    loss, _ = record_losses(new, batch, clip_range=0.2, beta=beta, loss_type="dr_grpo", max_tokens=4)
    torch.testing.assert_close(loss, torch.tensor([sum(tokens_0) / 4, token_1 / 4]))


# ----------------------------------------------------------------------------- influence exactness


@pytest.mark.parametrize("target,loss_type", [("seq", "grpo"), ("return", "dr_grpo")])
def test_grpo_influence_equals_the_per_record_autograd_loop(target, loss_type):
    from rlinfluence.lm.influence import reference_scores, sequence_scores, target_gradient
    from rlinfluence.lm.trainer import LMTrainer
    from rlinfluence.selection import Selection

    trainer = LMTrainer(compose_config(LM_TINY + LM_GRPO + [f"target={target}", f"env.lm.grpo.loss_type={loss_type}"]))
    batch = trainer.rollout(trainer.round_queries(1), seed=1, new_tokens=8)
    trainer.annotate(batch)
    # One update first, so that LoRA's B is no longer zero, both A and B carry gradient and π ≠ π_ref (the KL term).
    everything = Selection(np.ones(len(batch), bool))
    trainer.algorithm.update(batch, everything, np.random.default_rng(0))
    trainer.annotate(batch)
    val = trainer.rollout(trainer.val_queries(), seed=2, new_tokens=8)
    trainer.annotate(val)
    assert val.advantages is not None
    group_sums = (val.advantages * val.mask).sum(1) / val.mask.sum(1)  # each response's one advantage
    assert float(group_sums.view(-1, 4).sum(1).abs().max()) < 1e-4  # group-relative: zero sum per group
    direction = target_gradient(trainer.policy, val, target, chunk=3)
    assert all(float(v.abs().sum()) > 0 for v in direction)
    loss_fn = trainer.algorithm.record_loss
    fast = sequence_scores(trainer.policy, batch, direction, loss_fn, chunk=5).double()
    slow = reference_scores(trainer.policy, batch, direction, loss_fn).double()
    assert float((fast - slow).abs().max() / slow.abs().max()) <= 1e-4


# ----------------------------------------------------------------------------- a run and its config


def test_grpo_iif_trains_through_the_cli(tmp_path):
    command = [sys.executable, "-m", "rlinfluence", *LM_TINY, *LM_GRPO, "method=iif", "env.rounds=2"]
    result = subprocess.run([*command, f"runs_root={tmp_path}"], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    [metrics] = tmp_path.rglob("metrics.csv")
    rows = metrics_rows(metrics.parent)
    assert [int(row["round"]) for row in rows] == [0, 1, 2]
    for row in rows[1:]:
        assert int(row["n_records"]) == 16 and 0 < int(row["n_kept"]) <= 16
        assert float(row["kl_coef"]) == 0.04 and row["value_loss"] == "nan"  # β fixed, no value head
        assert 0 <= float(row["test_toxicity"]) <= 1 and math.isfinite(float(row["policy_loss"]))
        assert float(row["time_influence"]) > 0 and float(row["time_update"]) > 0


@pytest.mark.parametrize(
    "overrides,key",
    [
        (["env.lm.algorithm=trpo"], "env.lm.algorithm"),
        (["env.lm.algorithm=grpo", "env.lm.grpo.group_size=1"], "env.lm.grpo.group_size"),
        (["env.lm.algorithm=grpo", "env.n_steps=20"], "env.n_steps"),  # group_size 8
        (["env.lm.algorithm=grpo", "env.lm.val_size=12"], "env.lm.val_size"),
        (["env.lm.algorithm=grpo", "env.lm.grpo.loss_type=bnpo"], "env.lm.grpo.loss_type"),
        (["env.lm.algorithm=grpo", "env.lm.grpo.drop_baseline=none"], "env.lm.grpo.drop_baseline"),
        (["env.lm.algorithm=grpo", "env.lm.grpo.beta=-1"], "env.lm.grpo.beta"),
        (["env.lm.algorithm=grpo", "env.lm.influence_value_loss=true"], "env.lm.influence_value_loss"),
        (["env.lm.grpo.group_size=4"], "env.lm.grpo.group_size=4 needs env.lm.algorithm=grpo"),  # PPO ignores it
    ],
)
def test_bad_grpo_settings_raise_one_line_naming_the_key(overrides, key):
    assert key in config_refusal("env=toxicity_tiny", *overrides)
