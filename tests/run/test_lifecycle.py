"""What a run says as it goes (run/lifecycle.py, run/interrupts.py, run/tasks.py): an interrupt in one line
with consistent files (issue 32), a resume and an env's own optimizer announced, one task per task module."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import compose_config, rounds_in, tiny
from rlinfluence.cli import run_task
from rlinfluence.run.lifecycle import announce_env_optimizer
from rlinfluence.run.rundir import run_dir
from rlinfluence.run.tasks import TASK_MODULES, TASKS, load_task


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


def test_each_task_module_registers_the_task_named_after_it():
    for name in TASK_MODULES:
        assert load_task(name) is TASKS[name], name
    assert sorted(TASKS) == sorted(TASK_MODULES)  # no module registers a task the registry does not name
