"""The protocol switches between our IIF and the authors' released pipeline (conf/protocol/).

Each switch is tested for what it promises on its own, the clean protocol for changing nothing,
and `protocol=paper` for composing them all into a run directory of its own.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch

from conftest import compose_config, metrics_rows, one_network_rollout
from rlinfluence.config.schema import PPOConfig
from rlinfluence.control.engine import Stack
from rlinfluence.control.trainer import Trainer
from rlinfluence.influence import chunk_normalized_advantages, influence_scores, reference_scores
from rlinfluence.round import run_round
from rlinfluence.run.rundir import protocol_tag, relative_run_dir
from rlinfluence.selection import Selection
from rlinfluence.targets import ReturnTarget
from rlinfluence.update import minibatch_ids


def _round_buffers(cfg, rounds: int):
    """The buffers `rounds` consecutive rounds of a Trainer collect, each after its protocol step."""
    trainer = Trainer(cfg)
    buffers = []
    for _ in range(rounds):
        if cfg.collection.repeat_action_noise:
            trainer.action_generator.set_state(trainer.first_action_state)
        trainer.envs.start_round()
        buffers.append(
            one_network_rollout(
                trainer.model,
                trainer.envs,
                cfg.env.n_steps,
                cfg.ppo.gamma,
                cfg.ppo.gae_lambda,
                trainer.action_generator,
            )
        )
    trainer.close()
    return buffers


def _same(a, b) -> bool:
    return torch.equal(a.obs, b.obs) and torch.equal(a.actions, b.actions) and torch.equal(a.rewards, b.rewards)


def test_protocol_presets_set_every_switch_and_name_the_run_dir():
    clean = compose_config(["env=acrobot"])
    paper = compose_config(["env=acrobot", "protocol=paper"])
    assert protocol_tag(clean) == "clean" and protocol_tag(paper) == "paper"
    assert paper.influence.normalization == "chunk" and paper.ppo.drop_last_minibatch
    assert paper.collection.abandon_unfinished and paper.collection.repeat_starts
    assert paper.collection.repeat_action_noise
    assert relative_run_dir(clean).as_posix() == "acrobot/sgd/iif-p50/seed0"  # the paper runs' path is unchanged
    assert relative_run_dir(paper).as_posix() == "acrobot/sgd/iif-p50-paper/seed0"
    one_part = compose_config(["env=acrobot", "method=ppo", "collection.abandon_unfinished=true"])
    assert relative_run_dir(one_part).as_posix() == "acrobot/sgd/ppo-abandon/seed0"
    two_parts = compose_config(["env=acrobot", "collection.repeat_starts=true", "ppo.drop_last_minibatch=true"])
    assert protocol_tag(two_parts) == "droplast-samestarts"


def test_unknown_influence_normalization_is_rejected_in_one_line():
    from rlinfluence.choices import ConfigError
    from rlinfluence.validation import validate

    with pytest.raises(ConfigError, match=r"influence.normalization='batch' is not one of: buffer, chunk"):
        validate(compose_config(["influence.normalization=batch"]))


def test_chunk_normalization_normalizes_each_chunk_of_a_seeded_partition():
    advantages = torch.randn(200, dtype=torch.float64) * 3 + 1
    normalized = chunk_normalized_advantages(advantages, 64, np.random.default_rng(7))
    order = np.random.default_rng(7).permutation(200)  # the same draw: the chunks are seeded
    for start in range(0, 200, 64):
        chunk = normalized[order[start : start + 64]]
        assert abs(float(chunk.mean())) < 1e-12
        assert float(chunk.std()) == pytest.approx(1.0, abs=1e-6)  # unbiased std, as SB3 and the authors
    assert not torch.allclose(normalized, chunk_normalized_advantages(advantages, 64, np.random.default_rng(8)))
    # One chunk covering everything is the buffer normalisation.
    whole = chunk_normalized_advantages(advantages, 200, np.random.default_rng(7))
    assert torch.allclose(whole, (advantages - advantages.mean()) / (advantages.std() + 1e-8))


def test_chunk_normalized_influence_is_exact_and_changes_signs():
    cfg = compose_config(["env=acrobot", "env.n_steps=128"])
    trainer = Trainer(cfg)
    buffer = one_network_rollout(trainer.model, trainer.envs, 128, 0.99, 0.95, trainer.action_generator)
    chunked = chunk_normalized_advantages(buffer.advantages, 32, np.random.default_rng(0))
    fast = influence_scores(trainer.model, buffer, ReturnTarget(), PPOConfig(), 64, chunked)
    slow = reference_scores(trainer.model, buffer, ReturnTarget(), PPOConfig(), chunked)
    assert torch.allclose(fast, slow, rtol=0, atol=1e-5 * float(slow.abs().max()))
    by_buffer = influence_scores(trainer.model, buffer, ReturnTarget(), PPOConfig())
    assert (torch.sign(fast) != torch.sign(by_buffer)).any()  # the partition is a real difference
    trainer.close()


@pytest.mark.parametrize("drop_last, sizes", [(False, [32, 32, 32, 4]), (True, [32, 32, 32])])
def test_drop_last_minibatch_skips_the_partial_one(drop_last, sizes):
    selection = Selection(np.ones(100, bool))
    batches = list(minibatch_ids(selection, 32, np.random.default_rng(0), drop_last))
    assert [len(b) for b in batches] == sizes
    assert len(set(torch.cat(batches).tolist())) == sum(sizes)


def test_drop_last_minibatch_means_fewer_gradient_steps_in_a_run(tmp_path):
    from rlinfluence.cli import run_task

    overrides = [
        "env=frozenlake",
        "env.n_steps=80",
        "ppo.batch_size=32",
        "ppo.n_epochs=2",
        "env.rounds=1",
        "eval.episodes=2",
        "logger=disabled",
        "progress=false",
        "method=ppo",
    ]
    keep = run_task(compose_config(overrides), tmp_path / "keep")
    drop = run_task(compose_config(overrides + ["ppo.drop_last_minibatch=true"]), tmp_path / "drop")
    assert keep and drop
    steps = [int(metrics_rows(tmp_path / name)[-1]["gradient_steps"]) for name in ("keep", "drop")]
    assert steps == [2 * 3, 2 * 2]  # 80 records: 32 + 32 + 16 per epoch, or the two full ones


def test_clean_protocol_continues_episodes_across_rounds():
    cfg = compose_config(["env=acrobot", "env.n_steps=64"])  # Acrobot episodes last up to 500 steps
    first, second = _round_buffers(cfg, 2)
    assert not _same(first, second)
    # The second round's first observation continues the first round's unfinished episode.
    assert not torch.equal(second.obs[0], first.obs[0])


def test_abandon_unfinished_resets_only_envs_that_started():
    cfg = compose_config(["env=acrobot", "env.n_steps=64", "collection.abandon_unfinished=true"])
    trainer = Trainer(cfg)
    envs = trainer.envs
    seed_before = envs.episode_seeds[0]
    envs.start_round()  # nothing stepped yet: round 1 starts exactly as under the clean protocol
    assert envs.episode_seeds[0] == seed_before
    one_network_rollout(trainer.model, envs, 64, 0.99, 0.95, trainer.action_generator)
    assert envs.episode_actions[0]  # an unfinished episode
    envs.start_round()
    assert envs.episode_actions[0] == [] and envs.episode_returns[0] == 0.0
    assert envs.episode_seeds[0] != seed_before  # a fresh start from the continuing seed stream
    assert envs.finished_returns == []  # the abandoned episode is not reported as finished
    trainer.close()


def test_repeat_starts_replays_the_same_episode_seeds_every_round():
    cfg = compose_config(
        ["env=acrobot", "env.n_steps=64", "collection.abandon_unfinished=true", "collection.repeat_starts=true"]
    )
    trainer = Trainer(cfg)
    envs = trainer.envs
    seeds = []
    for _ in range(3):
        envs.start_round()
        seeds.append(envs.episode_seeds[0])
        one_network_rollout(trainer.model, envs, 64, 0.99, 0.95, trainer.action_generator)
    assert seeds[0] == seeds[1] == seeds[2]
    trainer.close()


def test_round_one_is_the_same_under_every_collection_switch():
    clean = _round_buffers(compose_config(["env=acrobot", "env.n_steps=64"]), 1)[0]
    for switch in ("abandon_unfinished", "repeat_starts", "repeat_action_noise"):
        cfg = compose_config(["env=acrobot", "env.n_steps=64", f"collection.{switch}=true"])
        assert _same(_round_buffers(cfg, 1)[0], clean), switch


def test_paper_collection_with_a_fixed_policy_collects_the_same_buffer_every_round():
    """Same seeded starts, same action noise, no carried-over episode: a policy that does not change
    (nothing trains between these rounds) sees exactly the same rollout each round."""
    cfg = compose_config(["env=acrobot", "env.n_steps=64", "protocol=paper"])
    first, second, third = _round_buffers(cfg, 3)
    assert _same(first, second) and _same(second, third)
    without_noise = compose_config(
        ["env=acrobot", "env.n_steps=64", "protocol=paper", "collection.repeat_action_noise=false"]
    )
    first, second = _round_buffers(without_noise, 2)
    assert torch.equal(first.obs[0], second.obs[0]) and not _same(first, second)


def test_paper_protocol_resumes_to_the_uninterrupted_run():
    """The partition RNG and the collection state are part of the checkpoint."""
    cfg = compose_config(
        ["env=acrobot", "protocol=paper", "env.n_steps=96", "ppo.batch_size=32", "eval.episodes=2", "eval.n_parallel=2"]
    )

    def results(rows):
        return [{k: v for k, v in row.items() if not k.startswith("time_")} for row in rows]

    whole = Trainer(cfg)
    uninterrupted = results([row for k in range(1, 5) for row in run_round(Stack([whole]), k)])
    first = Trainer(cfg)
    before = results([row for k in (1, 2) for row in run_round(Stack([first]), k)])
    saved = io.BytesIO()
    torch.save(first.state_dict(2), saved)
    saved.seek(0)
    resumed = Trainer(cfg)
    assert resumed.load_state_dict(torch.load(saved, weights_only=False)) == 2
    after = results([row for k in (3, 4) for row in run_round(Stack([resumed]), k)])
    assert before + after == uninterrupted
    for trainer in (whole, first, resumed):
        trainer.close()
