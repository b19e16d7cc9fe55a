"""The language-model path (env.agent=lm) on the offline tiny world: LM-PPO's pieces against hand-computed
cases, the per-sequence LoRA influence against an explicit per-record autograd loop, a run end to end,
resume after kill -9, and the one-line error for a model that is not on this machine."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

from conftest import LM_GRPO, LM_TINY, compose_config, config_refusal, metrics_rows
from rlinfluence.cli import run_task
from rlinfluence.lm.ppo import AdaptiveKLController, masked_whiten, penalized_rewards, ppo_update, token_gae
from rlinfluence.run.checkpoint import CORRUPTION
from rlinfluence.validation import validate

TIME_COLUMNS = {"time_collect", "time_forward", "time_influence", "time_select", "time_update", "time_eval"}

pytestmark = pytest.mark.usefixtures("tiny_lm_cache")  # every test here builds the tiny world in a fresh cache


# ----------------------------------------------------------------------------- hand-computed cases


def test_adaptive_kl_controller_steps_by_the_clipped_proportional_error():
    kl = AdaptiveKLController(0.04, target=0.1, horizon=10000)
    kl.update(0.15, 256)  # error +0.5, clipped to +0.2
    assert kl.value == pytest.approx(0.04 * (1 + 0.2 * 256 / 10000))
    kl.update(0.11, 1000)  # error +0.1
    assert kl.value == pytest.approx(0.04 * (1 + 0.2 * 256 / 10000) * 1.01)
    kl.update(0.0, 500)  # error −1, clipped to −0.2
    assert kl.value == pytest.approx(0.04 * (1 + 0.2 * 256 / 10000) * 1.01 * 0.99)


def test_reward_is_the_kl_penalty_per_token_plus_the_score_at_the_last_response_token():
    # Positions: two query predictions (mask 0), three response tokens, one pad.
    mask = torch.tensor([[0, 1, 1, 1, 0], [0, 0, 1, 0, 0]], dtype=torch.float32)
    logprobs = torch.tensor([[9.0, -1.0, -2.0, -3.0, 9.0], [9.0, 9.0, -1.0, 9.0, 9.0]])
    ref = logprobs - torch.tensor([[5.0, 0.1, 0.2, 0.3, 5.0], [5.0, 5.0, -0.4, 5.0, 5.0]])
    rewards = penalized_rewards(torch.tensor([2.0, -1.0]), logprobs, ref, mask, kl_coef=0.5)
    torch.testing.assert_close(rewards, torch.tensor([[0, -0.05, -0.1, -0.15 + 2.0, 0], [0, 0, 0.2 - 1.0, 0, 0]]))


def test_token_gae_against_a_hand_computed_response():
    mask = torch.tensor([[0, 1, 1, 1, 0]], dtype=torch.float32)
    rewards = torch.tensor([[0.0, 0.0, 0.0, 1.0, 0.0]])
    values = torch.tensor([[3.0, 0.5, 0.6, 0.7, 3.0]])  # off-mask values must not enter
    advantages, returns = token_gae(rewards, values, mask, gamma=1.0, lam=0.95)
    a2 = 1.0 - 0.7  # the value after the last token is 0
    a1 = (0.7 - 0.6) + 0.95 * a2
    a0 = (0.6 - 0.5) + 0.95 * a1
    torch.testing.assert_close(advantages, torch.tensor([[0, a0, a1, a2, 0]]))
    torch.testing.assert_close(returns, torch.tensor([[0, a0 + 0.5, a1 + 0.6, a2 + 0.7, 0]]))
    whitened = masked_whiten(advantages, mask)
    on = whitened[mask > 0]
    assert float(on.mean()) == pytest.approx(0, abs=1e-6) and float(on.std()) == pytest.approx(1, abs=1e-3)
    assert float(whitened[mask == 0].abs().sum()) == 0


# ----------------------------------------------------------------------------- influence exactness


@pytest.mark.parametrize("target", ["seq", "return"])
def test_sequence_influence_equals_the_per_record_autograd_loop(target):
    from rlinfluence.lm.influence import record_loss_fn, reference_scores, sequence_scores, target_gradient
    from rlinfluence.lm.trainer import LMTrainer
    from rlinfluence.selection import Selection

    trainer = LMTrainer(compose_config(LM_TINY + [f"target={target}"]))
    batch = trainer.rollout(trainer.round_queries(1), seed=1, new_tokens=8)
    trainer.annotate(batch)
    # One update first, so that LoRA's B is no longer zero and both A and B carry gradient.
    ppo_update(
        trainer.policy,
        trainer.optimizer,
        batch,
        Selection(np.ones(len(batch), bool)),
        trainer.cfg.ppo,
        trainer.lm_cfg,
        np.random.default_rng(0),
    )
    trainer.annotate(batch)
    val = trainer.rollout(trainer.prompts.val, seed=2, new_tokens=8)
    trainer.annotate(val)
    direction = target_gradient(trainer.policy, val, target, chunk=3)  # chunked accumulation
    assert all(float(v.abs().sum()) > 0 for v in direction)
    for with_value_loss in (False, True):  # ours, and the authors' value-loss leak
        loss_fn = record_loss_fn(0.2, 0.2, trainer.cfg.ppo.vf_coef, with_value_loss)
        fast = sequence_scores(trainer.policy, batch, direction, loss_fn, chunk=5).double()
        slow = reference_scores(trainer.policy, batch, direction, loss_fn).double()
        assert float((fast - slow).abs().max() / slow.abs().max()) <= 1e-4
    policy_only = sequence_scores(trainer.policy, batch, direction, record_loss_fn(0.2, 0.2, 0.1, False), chunk=16)
    # the flag changes the scores: the leak is real, and off by default
    assert not torch.allclose(policy_only.double(), fast)


# ----------------------------------------------------------------------------- runs


@pytest.mark.parametrize("algorithm", [[], LM_GRPO], ids=["ppo", "grpo"])
def test_iif_run_writes_lm_rows_and_resumes_after_kill_minus_9_to_the_same_metrics(tmp_path, algorithm):
    overrides = LM_TINY + algorithm + ["method=iif", "seed=3"]
    reference = tmp_path / "reference"
    run_task(compose_config(overrides), reference)
    rows = metrics_rows(reference, timings=False)
    assert [int(r["round"]) for r in rows] == [0, 1, 2, 3]
    for row in rows[1:]:
        assert 0 < float(row["kept_fraction"]) < 1 and int(row["n_negative"]) > 0
        assert int(row["gradient_steps"]) == 4 * -(-int(row["n_kept"]) // 4)  # 4 epochs of minibatch 4
        assert 0 <= float(row["test_toxicity"]) <= 1 and float(row["kl_coef"]) > 0
    timed = metrics_rows(reference)[1:]
    assert all(float(row[column]) > 0 for row in timed for column in TIME_COLUMNS - {"time_select"})

    # The same run through the CLI, killed once its round-1 checkpoint exists, then resumed.
    interrupted = tmp_path / "interrupted"
    command = [sys.executable, "-m", "rlinfluence", *overrides, f"runs_root={interrupted}"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    while (
        not list(interrupted.rglob("metrics.csv"))
        or len(next(interrupted.rglob("metrics.csv")).read_text().splitlines()) < 3
    ):
        assert time.monotonic() < deadline and process.poll() is None, "the run ended before it could be killed"
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    run_dir = next(interrupted.rglob("metrics.csv")).parent
    assert not (run_dir / "DONE").exists()
    cfg = compose_config(overrides + [f"runs_root={interrupted}"])
    from rlinfluence.run.loop import read_resume, train

    train(cfg, run_dir, read_resume(run_dir))
    assert metrics_rows(run_dir, timings=False) == rows


def test_ppo_and_random_keep_their_records_as_the_shared_methods_say(tmp_path):
    ppo = tmp_path / "ppo"
    run_task(compose_config(LM_TINY + ["method=ppo", "env.rounds=1"]), ppo)
    row = metrics_rows(ppo, timings=False)[1]
    assert (row["n_kept"], row["n_negative"], row["kept_fraction"]) == ("16", "nan", "1.0")
    random = tmp_path / "random"
    run_task(compose_config(LM_TINY + ["method=random", "env.rounds=1"]), random)
    row = metrics_rows(random, timings=False)[1]
    assert int(row["n_kept"]) == 16 - int(row["n_negative"])  # p = 100: as many dropped as are negative


def test_planted_responses_get_the_negated_reward_model_score(tmp_path):
    """corruption.kind=reward on the language-model agent: a noisy reward model. The round's responses are
    the clean run's; the planted ones' scores change sign, and the run logs what it planted."""
    from rlinfluence.lm.trainer import LMTrainer

    corrupted = ["corruption.kind=reward", "corruption.fraction=0.25"]
    clean_trainer, trainer = (LMTrainer(compose_config(LM_TINY + extra)) for extra in ([], corrupted))
    clean, planted_batch = clean_trainer.collect(1), trainer.collect(1)
    planted = planted_batch.planted
    assert clean.planted is None and planted is not None and int(planted.sum()) == 4
    assert torch.equal(clean.input_ids, planted_batch.input_ids)
    assert torch.equal(planted_batch.scores, torch.where(planted, -clean.scores, clean.scores))
    # The train return is what the responses earned (as the control agent's), not what the update saw.
    assert trainer.train_return(planted_batch) == pytest.approx(clean_trainer.train_return(clean))
    run_task(compose_config(LM_TINY + corrupted + ["method=iif", "env.rounds=1"]), tmp_path)
    [row] = [json.loads(line) for line in (tmp_path / CORRUPTION).read_text().splitlines()]
    assert row["n_planted"] == len(row["planted"]) == 4 and 0 <= row["auroc_influence"] <= 1


# ----------------------------------------------------------------------------- config and missing models


def test_real_env_without_its_model_is_refused_in_one_line_naming_it(tmp_path):
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_HOME": str(tmp_path / "hf"),
    }
    result = subprocess.run(
        [sys.executable, "-m", "rlinfluence", "env=toxicity", f"runs_root={tmp_path / 'runs'}", "logger=disabled"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 2
    assert "EleutherAI/gpt-neo-2.7B" in result.stderr and "HF_HOME" in result.stderr
    assert "Traceback" not in result.stderr
    assert len([line for line in result.stderr.splitlines() if line.startswith("rlinfluence:")]) == 1
    assert not (tmp_path / "runs").exists()


def test_progress_false_shows_no_library_bar_only_the_runs_lines(tmp_path):
    """transformers' "Loading weights" and "Writing model shards" bars, the tokenizer trainer's blank lines."""
    overrides = [*LM_TINY, "env.rounds=1", f"runs_root={tmp_path}"]  # LM_TINY has progress=false
    result = subprocess.run(
        [sys.executable, "-m", "rlinfluence", *overrides], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    lines = (result.stdout + result.stderr).splitlines()
    assert lines and all(line.startswith("rlinfluence: ") for line in lines), lines


@pytest.mark.parametrize(
    "overrides,key",
    [
        (["target=action"], "target.name"),
        (["method=td_error"], "method.name"),
        (["method=iif_auto"], "method.p"),
        (["env.lm.response_tokens=[9,8]"], "env.lm.response_tokens"),
        (["env.lm.val_size=0"], "env.lm.val_size"),
        (["model.dtype=int8"], "model.dtype"),
        (["env.lm.reward_model=facebook/roberta-hate-speech-dynabench-r4-target"], "env.lm.reward_model"),
        (["task=diagnose"], "task=diagnose"),
    ],
)
def test_bad_lm_settings_raise_one_line_naming_the_key(overrides, key):
    assert key in config_refusal("env=toxicity_tiny", *overrides)


def test_a_control_env_rejects_the_lm_target():
    from rlinfluence.choices import ConfigError

    with pytest.raises(ConfigError, match="target.name='seq'"):
        validate(compose_config(["env=frozenlake", "target=seq"]))


def test_the_lm_target_loss_refuses_a_name_it_has_no_entry_for():
    from rlinfluence.choices import ConfigError
    from rlinfluence.lm.influence import target_loss

    with pytest.raises(ConfigError, match=r"^target.name='action' is not one of: seq, return$"):
        # refused before the policy is called: no fall-through to f_return (so no policy or batch is needed)
        target_loss(None, None, "action")  # type: ignore[arg-type]
