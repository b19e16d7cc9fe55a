"""A run directory is its whole configuration; every bad input is refused in one line, before anything
is written. One test per defect of issue 9 (README, "Reliability"), each reproduced first."""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import pytest

from conftest import cli_refusal, compose_config, config_refusal, metrics_rows, refusal
from rlinfluence.choices import ConfigError
from rlinfluence.cli import quiet_libraries, run_task
from rlinfluence.config.paths import CONFIG_DIR
from rlinfluence.config.schema import OptimizerConfig, TargetConfig
from rlinfluence.control.networks import feature_extractor
from rlinfluence.figures.catalogue import OUTPUTS
from rlinfluence.run.checkpoint import RunDirError
from rlinfluence.run.identity import check_identity, config_hash, non_default_settings, write_identity
from rlinfluence.run.lifecycle import announce_env_optimizer
from rlinfluence.run.rundir import relative_run_dir, run_dir
from rlinfluence.run.tasks import TASK_MODULES, TASKS, load_task, task_names
from rlinfluence.targets import make_target
from rlinfluence.update import make_optimizer
from rlinfluence.validation import validate

FROZENLAKE_STATE_0 = "target.state=[1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]"


def tiny(runs_root: Path, *overrides: str):
    return compose_config(["debug=smoke", f"runs_root={runs_root}", *overrides])


def rounds_in(path: Path) -> list[int]:
    return [int(row["round"]) for row in metrics_rows(path)]


def cli(runs_root: Path, *overrides: str, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            *prefix,
            sys.executable,
            "-m",
            "rlinfluence",
            *overrides,
            f"runs_root={runs_root}",
            "logger=disabled",
            "progress=false",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )


# ----------------------------------------------------------------------------- 1. identity = configuration


def test_the_readmes_target_action_example_trains_after_the_default_job(tmp_path):
    default = tiny(tmp_path)
    assert run_task(default)["done"]
    action = tiny(tmp_path, "target=action", FROZENLAKE_STATE_0, "target.action=[2]")
    summary = run_task(action)
    assert summary is not None and summary["done"]  # it trained: not "already finished"
    assert run_dir(action) != run_dir(default) and (run_dir(action) / "DONE").exists()


def test_a_sweep_never_reuses_a_run_with_other_settings(tmp_path):
    result = cli(tmp_path, "-m", "debug=smoke", "method=ppo", "env.rounds=1,2")
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
    assert config_hash(cfg) is not None and non_default_settings(cfg) == changed


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


# ----------------------------------------------------------------------------- 3, 6. validated before it runs


@pytest.mark.parametrize(
    "overrides,message",
    [
        (["target.state=[1,0]", "target.action=[2]"], "target.state has 2 entries, env=frozenlake observes 16"),
        ([FROZENLAKE_STATE_0, "target.action=[4]"], "target.action=[4.0] must be one action index in 0..3"),
        ([FROZENLAKE_STATE_0, "target.action=[1,2]"], "must be one action index"),
    ],
)
def test_an_action_target_that_does_not_fit_the_env_is_a_config_error(overrides, message):
    assert message in config_refusal("target=action", *overrides)


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


@pytest.mark.parametrize(
    "name,damage",
    [
        ("checkpoint.pt", lambda path: path.write_bytes(b"")),
        ("checkpoint.pt", _truncate),
        ("metrics.csv", _drop_last_row),
        ("metrics.csv", lambda path: path.write_bytes(b"\xff\xfe\x00")),
        ("metrics.csv", Path.unlink),
    ],
)
def test_an_unreadable_checkpoint_or_metrics_file_is_named_in_one_line(tmp_path, name, damage):
    cfg = tiny(tmp_path)
    run_task(cfg)
    (run_dir(cfg) / "DONE").unlink()
    damage(run_dir(cfg) / name)
    kept = {path.name: path.read_bytes() for path in run_dir(cfg).iterdir() if path.is_file()}
    message = refusal(lambda: run_task(cfg), RunDirError)
    assert f"{run_dir(cfg) / name} is unreadable" in message and "force=true" in message
    assert {path.name: path.read_bytes() for path in run_dir(cfg).iterdir() if path.is_file()} == kept
    assert run_task(tiny(tmp_path, "force=true"))["done"]


# ----------------------------------------------------------------------------- 5, 7, 9. refused commands


FIT_HINT = (
    "; use a preset whose spaces fit, or override env.make_kwargs/env.wrappers; for another Gymnasium env use "
    "env=gym env.id=<id>"
)


@pytest.mark.parametrize(
    "overrides,message",
    [
        (["method.p=150"], "config error: method.p=150.0 must be in (0, 100]"),
        (["eval.episodes=0"], "config error: eval.episodes=0 must be >= 1"),
        (["target=action", "target.state=[1,0]", "target.action=[2]"], "config error: target.state has 2 entries"),
        (["seed=abc"], "config error: Error merging override seed=abc; Value 'abc' of type 'str' could not be"),
        (["env=frozen_lake"], "config error: In 'config': Could not find 'env/frozen_lake' (options: acrobot,"),
        (["ppo.batchsize=32"], "config error: Could not override 'ppo.batchsize'; Key 'batchsize' not in 'PPOConfig'"),
        # issue 32: each crashed (most after writing a run dir, one after training a whole run) or was filed wrongly
        (
            ["env.id=CartPole-v1"],
            "config error: env.id=CartPole-v1 does not take env=frozenlake's env.make_kwargs or "
            "env.wrappers=['one_hot'] (TypeError: ",
        ),
        (
            ["env=acrobot", "env.id=NoSuchEnv-v0"],
            "config error: env.id=NoSuchEnv-v0 is not a gymnasium env this machine can make (NameNotFound: ",
        ),
        (
            ["env=acrobot", "env.id=Pendulum-v1"],
            "config error: env.id=Pendulum-v1 has continuous actions (Box of shape "
            "(1,)), env=acrobot's preset is for discrete ones (Acrobot-v1: "
            "Discrete(3))" + FIT_HINT,
        ),
        (
            ["env=minigrid", "env.id=CartPole-v1", "env.wrappers=[]"],
            "config error: env.id=CartPole-v1 observes Box of "
            "shape (4,) and acts in Discrete(2), which "
            "env.network.kind=cnn cannot take",
        ),
        (
            ["task=diagnose", "analysis.diagnose.rollouts=0"],
            "config error: analysis.diagnose.rollouts=0 must be >= 1 (Monte-Carlo rollouts per (state, action))",
        ),
        (
            ["task=intervene", "analysis.intervene.rounds=[51]"],
            "config error: analysis.intervene.rounds=[51] must be rounds in 1..50 (env.rounds)",
        ),
        (["seed=-1"], "config error: seed=-1 must be >= 0"),
        (
            ["target.state=[1,0]"],
            "config error: target.state set the s* and a* of f_action, which target=return does "
            "not use: add target=action, or drop them",
        ),
        (
            ["task=figures", "figures.data_dir=no/such/dir"],
            "config error: figures.data_dir=no/such/dir is not a directory",
        ),
        (
            ["-m", "method.p=25,150"],
            "config error: method.p=150.0 must be in (0, 100] or auto (percent of "
            "negative-influence records to drop) (sweep job method.p=150)",
        ),
    ],
)
def test_a_rejected_command_is_one_line_exit_2_and_creates_nothing(tmp_path, overrides, message):
    runs_root = tmp_path / "runs"
    assert cli_refusal(cli(runs_root, *overrides)).startswith(f"rlinfluence: {message}")
    assert not runs_root.exists()


@pytest.mark.parametrize(
    "overrides,message",
    [
        (["ppo.max_grad_norm=0"], "ppo.max_grad_norm=0.0 must be > 0, or null (no clipping)"),
        (["ppo.ent_coef=-0.01"], "ppo.ent_coef=-0.01 must be >= 0"),
        (["ppo.vf_coef=-1"], "ppo.vf_coef=-1.0 must be >= 0"),
        (["optimizer.eps=0"], "optimizer.eps=0.0 must be > 0"),
        (["torch_threads=0"], "torch_threads=0 must be > 0"),
        (["logger.init_timeout=0"], "logger.init_timeout=0.0 must be > 0"),
        (["env.network.activation=gelu"], "env.network.activation='gelu' is not one of: tanh, relu"),
        (["env.network.pi=[64,0]"], "env.network.pi=[64, 0] must list layer widths > 0"),
        (
            ["env.wrappers=[one_hot,flip]"],
            "env.wrappers='flip' is not one of: one_hot, minigrid_image, atari, channel_first",
        ),
        (["env.state_key=cell"], "env.state_key='cell' is not one of: toy_text_state, minigrid_pose"),
        (
            ["env.wrappers=[]"],
            "env.id=FrozenLake-v1 observes Discrete(16) after env.wrappers=[], not an array a network takes" + FIT_HINT,
        ),
        (
            ["env=acrobot", "env.wrappers=[one_hot]"],
            "env.id=Acrobot-v1 does not take env=acrobot's env.make_kwargs or "
            "env.wrappers=['one_hot'] (AttributeError: ",
        ),
        (["task=timeline", "env=acrobot", "analysis.timeline.top=0"], "analysis.timeline.top=0 must be >= 1"),
        (["task=counterfactual", "analysis.counterfactual.groups=0"], "analysis.counterfactual.groups=0 must be >= 1"),
        (["task=replay"], "task=replay needs replay.run=<experiment>/<env>/<optimizer>/<leaf>/seed<k>"),
        (
            ["task=replay", "replay.run=main/nosuch/*"],
            "replay.run=main/nosuch/* matches no committed run of figures.data_dir=paper_figures/data (the nearest: ",
        ),
        (
            ["task=replay", "replay.run=main/frozenlake/sgd/iif-p50/seed0", "replay.rounds=-1"],
            "replay.rounds=-1 must be >= 0",
        ),
        # issue 33: each closed choice, refused from its one registry
        (["optimizer.name=adamw"], "optimizer.name='adamw' is not one of: sgd, adam"),
        (["env.network.kind=resnet"], "env.network.kind='resnet' is not one of: mlp, cnn, nature_cnn"),
        (["influence.backend=vjp"], "influence.backend='vjp' is not one of: jvp, reference"),
        (["influence.preconditioner=shampoo"], "influence.preconditioner='shampoo' is not one of: none, adam"),
        (["influence.checkpoints=final"], "influence.checkpoints='final' is not one of: round_start, every_step"),
        (["logger.mode=cloud"], "logger.mode='cloud' is not one of: offline, online, disabled"),
        (["target.name=seq"], "target.name='seq' is not one of: return, action"),
        (["method=td_error", "method.alpha=-1"], "method.alpha=-1.0 must be >= 0"),
        (["env.wrappers=[one_hot,atari]"], "env.wrappers has atari, whose settings env.atari are unset"),
    ],
)
def test_a_value_out_of_range_or_not_fitting_the_env_names_its_key(overrides, message):
    assert config_refusal(*overrides).startswith(message)


@pytest.mark.parametrize(
    "build,message",
    [
        (lambda: make_optimizer(OptimizerConfig(name="adamw"), []), "optimizer.name='adamw' is not one of: sgd, adam"),
        (lambda: make_target(TargetConfig(name="seq"), (16,)), "target.name='seq' is not one of: return, action"),
        (
            lambda: feature_extractor("resnet", (16,), 64),
            "env.network.kind='resnet' is not one of: mlp, cnn, nature_cnn",
        ),
    ],
)
def test_a_builder_refuses_a_name_it_has_no_entry_for_instead_of_falling_through(build, message):
    assert refusal(build) == message


@pytest.mark.parametrize(
    "task,key",
    [
        ("train", "runs_root"),
        ("diagnose", "runs_root"),
        ("diagnose", "figures.data_dir"),
        ("figures", "figures.out_dir"),
    ],
)
def test_a_path_a_task_would_write_under_a_file_is_refused_before_it_runs(tmp_path, task, key):
    (tmp_path / "file").write_text("")
    paths = {
        "runs_root": tmp_path / "runs",
        "figures.data_dir": tmp_path,
        "figures.out_dir": tmp_path / "out",
        key: tmp_path / "file" / "below",
    }
    message = config_refusal(f"task={task}", *(f"{name}={path}" for name, path in paths.items()))
    below, file = tmp_path / "file" / "below", tmp_path / "file"
    assert message == f"{key}={below} is not writable: {file} is not a directory"


def test_another_env_id_with_the_presets_spaces_is_accepted_and_hashed():
    cfg = compose_config(["env=acrobot", "env.id=CartPole-v1"])
    validate(cfg)
    assert config_hash(cfg) is not None  # filed apart from the preset's own runs


def test_a_method_setting_the_method_does_not_read_is_a_one_line_warning(tmp_path, capsys):
    cfg = tiny(tmp_path, "method=ppo", "method.p=30")
    validate(cfg)
    assert capsys.readouterr().err == (
        "rlinfluence: warning: method.p=30 does not apply to method=ppo; ignored (not part of the run's identity)\n"
    )
    assert run_dir(cfg) == run_dir(tiny(tmp_path, "method=ppo"))


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
        line = cli_refusal(cli(runs_root, "debug=smoke", prefix=_as_a_user()))
        assert line.startswith(f"rlinfluence: config error: runs_root={runs_root} is not writable")
        assert not any(runs_root.iterdir())


# ----------------------------------------------------------------------------- issue 32: interrupts, what a command did


def wait_for_rows(runs_root: Path, rows: int, process: subprocess.Popen) -> Path:
    while process.poll() is None:
        found = list(runs_root.rglob("metrics.csv"))
        if found and len(found[0].read_text().splitlines()) > rows:
            return found[0].parent
        time.sleep(0.02)
    raise AssertionError(f"the run ended before logging {rows} rounds: {process.communicate()}")


@pytest.mark.parametrize("signum,exit_code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_run_says_so_in_one_line_and_leaves_consistent_files(tmp_path, signum, exit_code):
    overrides = ["debug=smoke", "env.rounds=100", f"runs_root={tmp_path}"]
    # As from a terminal: a shell starts background jobs (pytest, say) with SIGINT ignored, which the run keeps.
    process = subprocess.Popen(
        [sys.executable, "-m", "rlinfluence", *overrides],
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    path = wait_for_rows(tmp_path, 2, process)  # rounds 0 and 1 written: it is training
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == exit_code
    started, line = stderr.strip().splitlines()  # the run dir named as it starts (issue 43), then the stop
    rounds = rounds_in(path)
    assert started == f"rlinfluence: training {path} (env.rounds=100)"
    assert line == f"rlinfluence: interrupted in round {len(rounds)} of 100; rerun the same command to resume"
    assert not list(path.rglob("*.tmp")) and not (path / "DONE").exists()
    assert json.loads((path / "summary.json").read_text())["rounds_completed"] == rounds[-1]
    resumed = subprocess.run(
        [sys.executable, "-m", "rlinfluence", *overrides], capture_output=True, text=True, timeout=600
    )
    assert f"resuming {path} from round {rounds[-1]} of 100" in resumed.stderr and rounds_in(path) == list(range(101))


def test_a_run_and_a_sweep_end_saying_where_their_results_went(tmp_path):
    result = cli(tmp_path, "debug=smoke")
    [path] = [done.parent for done in tmp_path.rglob("DONE")]
    final = json.loads((path / "summary.json").read_text())["final_test_return"]
    assert (
        result.stderr.strip().splitlines()[-1]
        == f"rlinfluence: trained {path} (env.rounds=2), final test return {final:.6g}"
    )
    result = cli(tmp_path, "debug=smoke")
    assert (
        result.stderr.strip()
        == f"rlinfluence: {path} is already finished, final test return {final:.6g} (force=true reruns it)"
    )

    (path / "DONE").unlink()  # as if killed after its last round
    result = cli(tmp_path, "-m", "debug=smoke", "seed=0,1,2")
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        f"rlinfluence: sweep of 3 runs: 2 trained, 1 resumed, 0 skipped, 0 failed or not run; run dirs under "
        f"{path.parent}"
    )


def test_figures_end_with_what_they_made_and_where(tmp_path):
    (tmp_path / "data").mkdir()
    result = cli(
        tmp_path / "runs",
        "task=figures",
        f"figures.data_dir={tmp_path / 'data'}",
        f"figures.out_dir={tmp_path / 'out'}",
    )
    assert result.returncode == 0, result.stderr
    assert (
        result.stdout.strip().splitlines()[-1]
        == f"rlinfluence: 0 made, 0 partial, {len(OUTPUTS)} missing (MISSING.md), written to {tmp_path / 'out'}"
    )
    assert (tmp_path / "out" / "MISSING.md").exists()


def test_library_notices_are_not_shown(caplog):
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.INFO):
        quiet_libraries()
        warnings.warn("transformers: `x` is deprecated", FutureWarning, stacklevel=1)
        figure, axes = pyplot.subplots()
        axes.bar(["1", "2"], [1, 2])  # strings that parse as numbers: matplotlib's categorical-units note
        pyplot.close(figure)
    assert not caught and "categorical units" not in caplog.text


def test_help_names_every_task_and_every_option_of_every_group():
    result = subprocess.run(
        [sys.executable, "-m", "rlinfluence", "--help"], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0 and "README.md" in result.stdout and "--cfg job" in result.stdout
    assert "ppo:" not in result.stdout  # the config dump stays behind --cfg
    for task in task_names():
        assert f"\n  {task} " in result.stdout, task
    for group in Path(CONFIG_DIR).iterdir():
        if group.is_dir() and group.name != "local":  # site settings, gitignored
            assert f"\n  {group.name} " in result.stdout, group.name
            for option in group.glob("*.yaml"):
                assert option.stem in result.stdout, f"{group.name}={option.stem}"


def test_each_task_module_registers_the_task_named_after_it():
    for name in TASK_MODULES:
        assert load_task(name) is TASKS[name], name
    assert sorted(TASKS) == sorted(TASK_MODULES)  # no module registers a task the registry does not name


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
