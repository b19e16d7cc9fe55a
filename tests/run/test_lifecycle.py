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

from conftest import compose_config, rounds_in, start_as_from_a_terminal, tiny
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
    process = start_as_from_a_terminal(
        [sys.executable, "-m", "rlinfluence", *overrides], stderr=subprocess.PIPE, text=True
    )
    path = wait_for_rows(tmp_path, 2, process)  # rounds 0 and 1 written: it is training
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == exit_code
    started, line = stderr.strip().splitlines()  # the run dir named as it starts (issue 43), then the stop
    rounds = rounds_in(path)
    assert started == f"rlinfluence: training {path} (env.rounds=100)"
    # it names the rounds that are done and the one a rerun trains first, not only the last one done
    k = len(rounds)
    assert line == (
        f"rlinfluence: interrupted in round {k} of 100 (rounds 0-{k - 1} are done); rerun the same command to "
        f"resume at round {k}"
    )
    assert not list(path.rglob("*.tmp")) and not (path / "DONE").exists()
    assert json.loads((path / "summary.json").read_text())["rounds_completed"] == rounds[-1]
    resumed = subprocess.run(
        [sys.executable, "-m", "rlinfluence", *overrides], capture_output=True, text=True, timeout=600
    )
    assert f"resuming {path} at round {k} of 100 (rounds 0-{k - 1} are done)" in resumed.stderr
    assert rounds_in(path) == list(range(101))


def test_a_resume_and_an_env_optimizer_are_announced(tmp_path, capsys):
    cfg = tiny(tmp_path)
    run_task(cfg)
    (run_dir(cfg) / "DONE").unlink()
    run_task(cfg)
    assert (
        f"rlinfluence: resuming {run_dir(cfg)}: rounds 0-2 are done, none is left to train" in capsys.readouterr().err
    )
    announce_env_optimizer(compose_config(["env=bipedalwalker"]))
    assert "env=bipedalwalker trains with optimizer=adam" in capsys.readouterr().err
    announce_env_optimizer(compose_config(["env=bipedalwalker", "optimizer=sgd"]))
    assert capsys.readouterr().err == ""


def test_the_progress_bar_starts_on_a_line_of_its_own_after_wandbs_lines(tmp_path, capfd, monkeypatch):
    monkeypatch.delenv("WANDB_MODE", raising=False)  # W&B offline, as a run's default logger is
    run_task(tiny(tmp_path, "logger=wandb", "logger.mode=offline", "progress=true"))
    err = capfd.readouterr().err
    assert "round/s" in err  # the bar was drawn
    wandb = [line for line in err.splitlines() if "wandb:" in line]
    assert wandb and all(line.startswith("wandb:") for line in wandb), wandb  # none glued to the bar's line


def test_each_task_module_registers_the_task_named_after_it():
    for name in TASK_MODULES:
        assert load_task(name) is TASKS[name], name
    assert sorted(TASKS) == sorted(TASK_MODULES)  # no module registers a task the registry does not name
