"""A command's last line (cli.py): a refused command is one line, exit 2, with nothing created (issues 9, 32);
a run, a sweep and the figures end saying what they made and where."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from conftest import FIT_HINT, cli_refusal, cli_run
from rlinfluence.figures.catalogue import OUTPUTS


@pytest.mark.parametrize(
    "overrides,message",
    [
        (["method.p=150"], "config error: method.p=150.0 must be in (0, 100]"),
        (["eval.episodes=0"], "config error: eval.episodes=0 must be >= 1"),
        (["target=action", "target.state=[1,0]", "target.action=[2]"], "config error: target.state has 2 entries"),
        (["seed=abc"], "config error: Error merging override seed=abc; Value 'abc' of type 'str' could not be"),
        (["env=frozen_lake"], "config error: In 'config': Could not find 'env/frozen_lake' (options: acrobot,"),
        # issue 55: Hydra advised `+ppo.batchsize=32`, which trained on under a new hash; both are refused alike
        (["ppo.batchsize=32"], "config error: ppo.batchsize is not a setting (did you mean ppo.batch_size?)"),
        (["+ppo.batchsize=32"], "config error: ppo.batchsize is not a setting (did you mean ppo.batch_size?)"),
        (["+foo=1"], "config error: foo is not a setting (rlinfluence --cfg job lists the settings)"),
        (
            ["-m", "seed=0,1", "+ppo.batchsize=32"],
            "config error: ppo.batchsize is not a setting (did you mean ppo.batch_size?) (sweep job seed=0)",
        ),
        (["experiment_name=../../escape"], "config error: experiment_name='../../escape' must be one folder name"),
        (
            ["debug=smoke", "ppo.batch_size=1000"],
            "config error: ppo.batch_size=1000 must be <= the records of a round, env.n_envs x env.n_steps = "
            "1 x 64 = 64",
        ),
        (
            ["env=gym", "env.id=nosuchmodule:Foo-v0"],
            "config error: env.id=nosuchmodule:Foo-v0 needs the module nosuchmodule, which cannot be imported here",
        ),
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
    runs_root = tmp_path / "work" / "runs"
    assert cli_refusal(cli_run(runs_root, *overrides)).startswith(f"rlinfluence: {message}")
    assert not any(tmp_path.iterdir())  # nor anything beside it (experiment_name=../../escape)


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
        line = cli_refusal(cli_run(runs_root, "debug=smoke", prefix=_as_a_user()))
        assert line.startswith(f"rlinfluence: config error: runs_root={runs_root} is not writable")
        assert not any(runs_root.iterdir())


def test_a_run_and_a_sweep_end_saying_where_their_results_went(tmp_path):
    result = cli_run(tmp_path, "debug=smoke")
    [path] = [done.parent for done in tmp_path.rglob("DONE")]
    final = json.loads((path / "summary.json").read_text())["final_test_return"]
    assert (
        result.stderr.strip().splitlines()[-1]
        == f"rlinfluence: trained {path} (env.rounds=2), final test return {final:.6g}"
    )
    result = cli_run(tmp_path, "debug=smoke")
    assert (
        result.stderr.strip()
        == f"rlinfluence: {path} is already finished, final test return {final:.6g} (force=true reruns it)"
    )

    (path / "DONE").unlink()  # as if killed after its last round
    result = cli_run(tmp_path, "-m", "debug=smoke", "seed=0,1,2")
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        f"rlinfluence: sweep of 3 runs: 2 trained, 1 resumed, 0 skipped, 0 failed or not run; run dirs under "
        f"{path.parent}"
    )


def test_figures_end_with_what_they_made_and_where(tmp_path):
    (tmp_path / "data").mkdir()
    result = cli_run(
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
