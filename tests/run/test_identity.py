"""A run directory is its whole configuration (run/identity.py): the paper's settings keep their readable path,
any other setting adds a stable hash, and a run resumes only with its own settings, read with today's keys
(issue 9)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import FROZENLAKE_STATE_0, compose_config, refusal, rounds_in, tiny
from rlinfluence.cli import run_task
from rlinfluence.run.checkpoint import RunDirError
from rlinfluence.run.identity import check_identity, config_hash, digest, non_default_settings, write_identity
from rlinfluence.run.rundir import relative_run_dir, run_dir


def test_the_papers_settings_keep_their_path_and_any_other_setting_adds_a_hash():
    assert (
        str(relative_run_dir(compose_config(["env=acrobot", "method=random", "seed=3"])))
        == "acrobot/sgd/random-p50/seed3"
    )
    # Explicit defaults, the key an interpolation reads, and settings that cannot change results: no hash.
    for overrides in (
        ["eval.episodes=1000"],
        ["optimizer.lr=5e-3"],
        ["logger=disabled", "progress=false", "runs_root=/elsewhere", "force=true"],
        ["+experiment=main"],
        ["protocol=paper"],
    ):
        assert config_hash(compose_config(overrides)) is None, overrides
    assert config_hash(compose_config(["eval.episodes=100"])) == config_hash(compose_config(["env.eval_episodes=100"]))
    hashes = {
        config_hash(compose_config(overrides))
        for overrides in (
            ["eval.episodes=100"],
            ["env.rounds=3"],
            ["ppo.gamma=0.9"],
            ["influence.chunk_size=64"],
            ["device=cuda"],
            ["torch_threads=2"],
            ["target=action", FROZENLAKE_STATE_0, "target.action=[2]"],
        )
    }
    assert None not in hashes and len(hashes) == 7


def test_the_hash_is_stable_across_processes_and_versions():
    # sha256(b'{"eval.episodes":100}'), the canonical JSON of the one changed setting: a change here
    # moves every such run to a new directory.
    assert config_hash(compose_config(["eval.episodes=100"])) == "92a12d"


def test_runs_made_before_the_schedules_keep_their_directories():
    # Two run dirs of runs/ as they were made (identity.json: non_default eval.episodes=100, and
    # eval.episodes=10 with influence.checkpoints=every_step).
    assert (
        str(relative_run_dir(compose_config(["env=acrobot", "method=ppo", "seed=5", "eval.episodes=100"])))
        == "acrobot/sgd/ppo-92a12d/seed5"
    )
    assert (
        config_hash(compose_config(["method=ppo", "eval.episodes=10", "influence.checkpoints=every_step"])) == "7d08a8"
    )


def test_a_run_is_resumed_only_with_its_own_settings(tmp_path):
    six = tiny(tmp_path, "env.rounds=3")
    run_task(six)
    (run_dir(six) / "DONE").unlink()  # as if killed after its last round
    two = tiny(tmp_path, "env.rounds=1")
    assert run_task(two)["rounds_completed"] == 1
    assert rounds_in(run_dir(two)) == [0, 1] and rounds_in(run_dir(six)) == [0, 1, 2, 3]
    # A hand-edited conf/ can still make one dir hold other settings: refused, naming the first key.
    identity = run_dir(six) / "identity.json"
    stored = json.loads(identity.read_text())
    stored["settings"]["ppo.gamma"] = 0.9
    identity.write_text(json.dumps(stored))
    with pytest.raises(RunDirError) as error:
        run_task(six)
    assert "ppo.gamma=0.9, this command has ppo.gamma=0.99" in str(error.value) and "force=true" in str(error.value)


def made_before(path: Path, *keys: str) -> None:
    """Edit the run's identity.json as if the run had been made before `keys` (and the keys below them) existed."""
    identity = path / "identity.json"
    stored = json.loads(identity.read_text())
    for key in [key for key in stored["settings"] if any(key == new or key.startswith(f"{new}.") for new in keys)]:
        del stored["settings"][key]
    identity.write_text(json.dumps(stored))


SCHEDULES = ("ppo.lr_schedule", "ppo.clip_range_schedule")


# Keys added after hundreds of runs were made: the schedules, then the Atari preprocessing and td_error's
# alpha, constants until they became settings (issue 33), then the collection env's kwargs (issue 42).
NEW_KEYS = (*SCHEDULES, "env.atari", "method.alpha", "env.train_make_kwargs")


def test_a_run_made_before_a_key_existed_resumes_with_the_key_at_its_default(tmp_path):
    three = tiny(tmp_path, "env.rounds=3")
    run_task(three)
    (run_dir(three) / "DONE").unlink()  # as if killed after its last round
    made_before(run_dir(three), *SCHEDULES)
    assert run_task(three)["done"]
    assert set(SCHEDULES) <= json.loads((run_dir(three) / "identity.json").read_text())["settings"].keys()


def test_a_minigrid_run_made_on_the_librarys_env_id_counts_as_made_on_ours(tmp_path):
    """The preset moved from the library's Empty-8x8 to ours (the same trajectories, envs/ids.py), and our
    simulator's module moved into envs/: a run recorded with the library's id or our former module's id is
    this command's run; any other id is still refused."""
    cfg = compose_config(["env=minigrid", f"runs_root={tmp_path}"])
    path = run_dir(cfg)
    path.mkdir(parents=True)
    write_identity(path, cfg)
    (path / "metrics.csv").write_text("round\n0\n")
    identity = path / "identity.json"
    stored = json.loads(identity.read_text())
    for earlier_id in ("minigrid:MiniGrid-Empty-8x8-v0", "rlinfluence.minigrid_view:MiniGrid-Empty-8x8-v0-fast"):
        stored["settings"]["env.id"] = earlier_id
        identity.write_text(json.dumps(stored))
        check_identity(path, cfg)
    stored["settings"]["env.id"] = "minigrid:MiniGrid-Empty-16x16-v0"
    identity.write_text(json.dumps(stored))
    with pytest.raises(RunDirError, match="env.id"):
        check_identity(path, cfg)


def test_a_key_the_run_predates_set_otherwise_is_refused_in_one_line(tmp_path):
    three = tiny(tmp_path, "env.rounds=3")
    run_task(three)
    made_before(run_dir(three), *SCHEDULES)
    # (Setting it otherwise changes the hash; only a moved default could bring the command to this dir.)
    message = refusal(
        lambda: check_identity(run_dir(three), tiny(tmp_path, "env.rounds=3", "ppo.lr_schedule=linear")), RunDirError
    )
    assert (
        'ppo.lr_schedule="constant" (its default: the run predates the key), this command has '
        'ppo.lr_schedule="linear" (1 setting(s) differ); force=true'
    ) in message


def test_a_key_conf_no_longer_has_is_refused(tmp_path):
    three = tiny(tmp_path, "env.rounds=3")
    run_task(three)
    identity = run_dir(three) / "identity.json"
    stored = json.loads(identity.read_text())
    stored["settings"]["ppo.retired"] = 1
    identity.write_text(json.dumps(stored))
    with pytest.raises(RunDirError, match='ppo.retired=1, this command has ppo.retired="<unset>"'):
        check_identity(run_dir(three), three)


@pytest.mark.parametrize(
    "env,method",
    [(env, "ppo") for env in ("frozenlake", "acrobot", "minigrid", "lunarlander", "highway", "bipedalwalker", "pong")]
    + [("frozenlake", "td_error"), ("lunarlander", "td_error"), ("pong", "iif")],
)
def test_new_keys_at_their_defaults_keep_every_existing_run(tmp_path, env, method):
    """NEW_KEYS: every env's and method's runs keep their paths, and an identity written before the keys
    existed is the default command's run."""
    cfg = compose_config([f"env={env}", f"method={method}"])
    assert config_hash(cfg) is None
    write_identity(tmp_path, cfg)
    (tmp_path / "DONE").touch()
    made_before(tmp_path, *NEW_KEYS)
    check_identity(tmp_path, cfg)


@pytest.mark.parametrize(
    "overrides,changed",
    [
        (["method=td_error", "method.alpha=0.3"], {"method.alpha": 0.3}),
        (["env=pong", "env.atari.frame_stack=2"], {"env.atari.frame_stack": 2}),
    ],
)
def test_a_former_constant_set_otherwise_is_another_run(overrides, changed):
    cfg = compose_config(overrides)
    assert non_default_settings(cfg) == changed and config_hash(cfg) == digest(changed)
