"""A run directory is its whole configuration; every bad input is refused in one line, before anything
is written. One test per defect of issue 9 (README, "Reliability"), each reproduced first."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import TINY, compose_config
from rlinfluence.checkpoint import RunDirError
from rlinfluence.cli import announce_env_optimizer, run_task
from rlinfluence.config import ConfigError
from rlinfluence.rundir import check_identity, config_hash, relative_run_dir, run_dir, write_identity
from rlinfluence.validation import validate

FROZENLAKE_STATE_0 = "target.state=[1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]"


def tiny(runs_root: Path, *overrides: str):
    return compose_config([*TINY, f"runs_root={runs_root}", *overrides])


def rounds_in(path: Path) -> list[int]:
    with open(path / "metrics.csv", newline="") as handle:
        return [int(row["round"]) for row in csv.DictReader(handle)]


def cli(runs_root: Path, *overrides: str, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    return subprocess.run([*prefix, sys.executable, "-m", "rlinfluence", *overrides, f"runs_root={runs_root}",
                           "logger=disabled", "progress=false"], capture_output=True, text=True, timeout=300)


# ----------------------------------------------------------------------------- 1. identity = configuration


def test_the_readmes_target_action_example_trains_after_the_default_job(tmp_path):
    default = tiny(tmp_path)
    assert run_task(default)["done"]
    action = tiny(tmp_path, "target=action", FROZENLAKE_STATE_0, "target.action=[2]")
    summary = run_task(action)
    assert summary is not None and summary["done"]  # it trained: not "already finished"
    assert run_dir(action) != run_dir(default) and (run_dir(action) / "DONE").exists()


def test_a_sweep_never_reuses_a_run_with_other_settings(tmp_path):
    result = cli(tmp_path, "-m", *TINY[:2], "method=ppo", "env.rounds=1,2")
    assert result.returncode == 0, result.stderr
    dirs = sorted(path.parent for path in tmp_path.rglob("DONE"))
    assert len(dirs) == 2 and sorted(len(rounds_in(path)) for path in dirs) == [2, 3]


def test_force_deletes_only_its_own_run(tmp_path):
    three = tiny(tmp_path, "env.rounds=3")
    run_task(three)
    before = {path.name: path.read_bytes() for path in run_dir(three).iterdir() if path.is_file()}
    run_task(tiny(tmp_path, "env.rounds=1", "force=true"))
    assert {path.name: path.read_bytes() for path in run_dir(three).iterdir() if path.is_file()} == before


def test_the_papers_settings_keep_their_path_and_any_other_setting_adds_a_hash():
    assert str(relative_run_dir(compose_config(["env=acrobot", "method=random", "seed=3"]))) == \
        "acrobot/sgd/random-p50/seed3"
    # Explicit defaults, the key an interpolation reads, and settings that cannot change results: no hash.
    for overrides in (["eval.episodes=1000"], ["optimizer.lr=5e-3"], ["logger=disabled", "progress=false",
                      "runs_root=/elsewhere", "force=true"], ["+experiment=main"], ["protocol=paper"]):
        assert config_hash(compose_config(overrides)) is None, overrides
    assert config_hash(compose_config(["eval.episodes=100"])) == config_hash(compose_config(["env.eval_episodes=100"]))
    hashes = {config_hash(compose_config(overrides)) for overrides in (
        ["eval.episodes=100"], ["env.rounds=3"], ["ppo.gamma=0.9"], ["influence.chunk_size=64"], ["device=cuda"],
        ["torch_threads=2"], ["target=action", FROZENLAKE_STATE_0, "target.action=[2]"])}
    assert None not in hashes and len(hashes) == 7


def test_the_hash_is_stable_across_processes_and_versions():
    # sha256(b'{"eval.episodes":100}'), the canonical JSON of the one changed setting: a change here
    # moves every such run to a new directory.
    assert config_hash(compose_config(["eval.episodes=100"])) == "92a12d"


# ----------------------------------------------------------------------------- 2. resume only what matches


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
    """Edit the run's identity.json as if the run had been made before `keys` existed."""
    identity = path / "identity.json"
    stored = json.loads(identity.read_text())
    for key in keys:
        del stored["settings"][key]
    identity.write_text(json.dumps(stored))


SCHEDULES = ("ppo.lr_schedule", "ppo.clip_range_schedule")


def test_a_run_made_before_a_key_existed_resumes_with_the_key_at_its_default(tmp_path):
    three = tiny(tmp_path, "env.rounds=3")
    run_task(three)
    (run_dir(three) / "DONE").unlink()  # as if killed after its last round
    made_before(run_dir(three), *SCHEDULES)
    assert run_task(three)["done"]
    assert set(SCHEDULES) <= json.loads((run_dir(three) / "identity.json").read_text())["settings"].keys()


def test_a_minigrid_run_made_on_the_librarys_env_id_counts_as_made_on_ours(tmp_path):
    """The preset moved from the library's Empty-8x8 to ours (the same trajectories, rundir.SAME_SIMULATOR):
    a run recorded with the library's id is this command's run; any other id is still refused."""
    cfg = compose_config(["env=minigrid", f"runs_root={tmp_path}"])
    path = run_dir(cfg)
    path.mkdir(parents=True)
    write_identity(path, cfg)
    (path / "metrics.csv").write_text("round\n0\n")
    identity = path / "identity.json"
    stored = json.loads(identity.read_text())
    stored["settings"]["env.id"] = "minigrid:MiniGrid-Empty-8x8-v0"
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
    with pytest.raises(RunDirError) as error:
        check_identity(run_dir(three), tiny(tmp_path, "env.rounds=3", "ppo.lr_schedule=linear"))
    message = str(error.value)
    assert ('ppo.lr_schedule="constant" (its default: the run predates the key), this command has '
            'ppo.lr_schedule="linear" (1 setting(s) differ); force=true') in message and "\n" not in message


def test_a_key_conf_no_longer_has_is_refused(tmp_path):
    three = tiny(tmp_path, "env.rounds=3")
    run_task(three)
    identity = run_dir(three) / "identity.json"
    stored = json.loads(identity.read_text())
    stored["settings"]["ppo.retired"] = 1
    identity.write_text(json.dumps(stored))
    with pytest.raises(RunDirError, match='ppo.retired=1, this command has ppo.retired="<unset>"'):
        check_identity(run_dir(three), three)


@pytest.mark.parametrize("env", ["frozenlake", "acrobot", "minigrid", "lunarlander", "highway", "bipedalwalker",
                                 "pong"])
def test_new_keys_at_their_defaults_keep_every_existing_run(tmp_path, env):
    """The schedules (keys added after hundreds of runs were made): every env's runs keep their paths,
    and an identity written before the keys existed is the default command's run."""
    cfg = compose_config([f"env={env}", "method=ppo"])
    assert config_hash(cfg) is None
    write_identity(tmp_path, cfg)
    (tmp_path / "DONE").touch()
    made_before(tmp_path, *SCHEDULES)
    check_identity(tmp_path, cfg)


def test_runs_made_before_the_schedules_keep_their_directories():
    # Two run dirs of runs/ as they were made (identity.json: non_default eval.episodes=100, and
    # eval.episodes=10 with influence.checkpoints=every_step).
    assert str(relative_run_dir(compose_config(["env=acrobot", "method=ppo", "seed=5", "eval.episodes=100"]))) == \
        "acrobot/sgd/ppo-92a12d/seed5"
    assert config_hash(compose_config(["method=ppo", "eval.episodes=10", "influence.checkpoints=every_step"])) == \
        "7d08a8"


# ----------------------------------------------------------------------------- 3, 6. validated before it runs


@pytest.mark.parametrize("overrides,message", [
    (["target.state=[1,0]", "target.action=[2]"], "target.state has 2 entries, env=frozenlake observes 16"),
    ([FROZENLAKE_STATE_0, "target.action=[4]"], "target.action=[4.0] must be one action index in 0..3"),
    ([FROZENLAKE_STATE_0, "target.action=[1,2]"], "must be one action index"),
])
def test_an_action_target_that_does_not_fit_the_env_is_a_config_error(overrides, message):
    with pytest.raises(ConfigError) as error:
        validate(compose_config(["target=action", *overrides]))
    assert message in str(error.value) and "\n" not in str(error.value)


def test_an_action_target_on_an_image_env_is_given_flat(tmp_path):
    state = "target.state=[" + ",".join(["0"] * 3 * 7 * 7) + "]"
    cfg = tiny(tmp_path, "env=minigrid", "env.rounds=1", "target=action", state, "target.action=[2]")
    assert run_task(cfg)["done"]


def test_no_evaluation_episode_is_a_config_error():
    with pytest.raises(ConfigError, match="eval.episodes=0 must be >= 1"):
        validate(compose_config(["eval.episodes=0"]))


# ----------------------------------------------------------------------------- 4. corrupt state


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:100])


def _drop_last_row(path: Path) -> None:
    path.write_text("".join(path.read_text().splitlines(keepends=True)[:-1]))


@pytest.mark.parametrize("name,damage", [
    ("checkpoint.pt", lambda path: path.write_bytes(b"")),
    ("checkpoint.pt", _truncate),
    ("metrics.csv", _drop_last_row),
    ("metrics.csv", lambda path: path.write_bytes(b"\xff\xfe\x00")),
    ("metrics.csv", Path.unlink),
])
def test_an_unreadable_checkpoint_or_metrics_file_is_named_in_one_line(tmp_path, name, damage):
    cfg = tiny(tmp_path)
    run_task(cfg)
    (run_dir(cfg) / "DONE").unlink()
    damage(run_dir(cfg) / name)
    kept = {path.name: path.read_bytes() for path in run_dir(cfg).iterdir() if path.is_file()}
    with pytest.raises(RunDirError) as error:
        run_task(cfg)
    message = str(error.value)
    assert f"{run_dir(cfg) / name} is unreadable" in message and "force=true" in message and "\n" not in message
    assert {path.name: path.read_bytes() for path in run_dir(cfg).iterdir() if path.is_file()} == kept
    assert run_task(tiny(tmp_path, "force=true"))["done"]


# ----------------------------------------------------------------------------- 5, 7, 9. refused commands


@pytest.mark.parametrize("overrides,message", [
    (["method.p=150"], "config error: method.p=150.0 must be in (0, 100]"),
    (["eval.episodes=0"], "config error: eval.episodes=0 must be >= 1"),
    (["target=action", "target.state=[1,0]", "target.action=[2]"], "config error: target.state has 2 entries"),
    (["seed=abc"], "config error: Error merging override seed=abc; Value 'abc' of type 'str' could not be"),
    (["env=frozen_lake"], "config error: In 'config': Could not find 'env/frozen_lake' (options: acrobot,"),
    (["ppo.batchsize=32"], "config error: Could not override 'ppo.batchsize'; Key 'batchsize' not in 'PPOConfig'"),
])
def test_a_rejected_command_is_one_line_exit_2_and_creates_nothing(tmp_path, overrides, message):
    runs_root = tmp_path / "runs"
    result = cli(runs_root, *overrides)
    assert result.returncode == 2
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"rlinfluence: {message}")
    assert not runs_root.exists()


def _as_a_user() -> tuple[str, ...]:
    """Root writes through read-only permissions: run the command as `nobody` then."""
    if os.geteuid() != 0:
        return ()
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: cannot make a directory unwritable")
    return ("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups")


def test_a_read_only_runs_root_is_one_line_exit_2():
    with tempfile.TemporaryDirectory() as parent:  # in /tmp, which every user can reach
        Path(parent).chmod(0o755)
        runs_root = Path(parent) / "runs"
        runs_root.mkdir(mode=0o555)
        result = cli(runs_root, *TINY[:4], prefix=_as_a_user())
        assert result.returncode == 2, result.stderr
        [line] = result.stderr.strip().splitlines()
        assert line.startswith(f"rlinfluence: config error: runs_root={runs_root} is not writable")
        assert not any(runs_root.iterdir())


def test_a_resume_and_an_env_optimizer_are_announced(tmp_path, capsys):
    cfg = tiny(tmp_path)
    run_task(cfg)
    (run_dir(cfg) / "DONE").unlink()
    run_task(cfg)
    assert f"rlinfluence: resuming {run_dir(cfg)} from round 2 of 2" in capsys.readouterr().err
    announce_env_optimizer(compose_config(["env=bipedalwalker"]))
    assert "env=bipedalwalker trains with optimizer=adam" in capsys.readouterr().err
    announce_env_optimizer(compose_config(["env=bipedalwalker", "optimizer=sgd"]))
    assert capsys.readouterr().err == ""
