"""A run dir has one writer (run/writer.py): a second process that would train a run being trained is refused
in one line before it writes, on either engine, and a holder that died does not block the resume."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import cli_refusal, cli_run, rounds_in, start_as_from_a_terminal
from rlinfluence.run.checkpoint import RunDirError
from rlinfluence.run.writer import WRITER_LOCK, RunDirBusy, sole_writer

# Rounds enough that a run is still training when the test stops it (SIGINT: a clean stop between rounds).
RACE = ("debug=smoke", "env.rounds=100000", "experiment_name=race")


def start(runs_root: Path, *overrides: str) -> subprocess.Popen:
    command = [sys.executable, "-m", "rlinfluence", *RACE, *overrides, f"runs_root={runs_root}"]
    return start_as_from_a_terminal(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_until_held(run_dir: Path, process: subprocess.Popen) -> None:
    """Until `process` holds the run's writer lock and has written a row (it is training)."""
    while process.poll() is None:
        lock, metrics = run_dir / WRITER_LOCK, run_dir / "metrics.csv"
        if lock.exists() and f"pid {process.pid}" in lock.read_text() and metrics.exists():
            if len(metrics.read_text().splitlines()) > 1:
                return
        time.sleep(0.02)
    raise AssertionError(f"the run ended before it was seen training: {process.communicate()}")


def stop(process: subprocess.Popen) -> str:
    """Interrupt a training process as Ctrl-C does; its stderr, asserted to end cleanly (exit 130, no traceback)."""
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130 and "Traceback" not in stderr, stderr
    return stderr


def seed_dir(runs_root: Path, seed: int) -> Path:
    [path] = runs_root.glob(f"race/frozenlake/sgd/*/seed{seed}")
    return path


def wait_for_dir(runs_root: Path, seed: int, process: subprocess.Popen) -> Path:
    while process.poll() is None:
        found = list(runs_root.glob(f"race/frozenlake/sgd/*/seed{seed}"))
        if found:
            return found[0]
        time.sleep(0.02)
    raise AssertionError(f"the run ended before its run dir was made: {process.communicate()}")


def test_a_second_process_on_a_run_in_training_is_refused_and_the_rows_stay_clean(tmp_path):
    first = start(tmp_path, "seed=7")
    run_dir = wait_for_dir(tmp_path, 7, first)
    wait_until_held(run_dir, first)
    second = cli_run(tmp_path, *RACE, "seed=7")
    stop(first)
    assert cli_refusal(second) == (
        f"rlinfluence: {run_dir} is being trained by another process (host {os.uname().nodename}, pid {first.pid}); "
        "a run dir has one writer: rerun this command once that process has ended, and it resumes where that one "
        "stopped"
    )
    rounds = rounds_in(run_dir)
    assert rounds == list(range(len(rounds)))  # each round once, in order


def test_an_overlapping_stacked_set_is_refused_whole(tmp_path):
    first = start(tmp_path, "engine=stacked", "seeds=[0,1,2,3]")
    wait_until_held(wait_for_dir(tmp_path, 3, first), first)
    second = cli_run(tmp_path, *RACE, "engine=stacked", "seeds=[2,3,4,5]")
    stop(first)
    line = cli_refusal(second)
    assert line.startswith(f"rlinfluence: {seed_dir(tmp_path, 2)} is being trained by another process (host ")
    assert line.endswith("(no seed of seeds=[2, 3, 4, 5] was trained: a set trains all or none)")
    rounds = rounds_in(seed_dir(tmp_path, 0))
    assert rounds == list(range(len(rounds)))
    for seed in range(1, 4):
        assert rounds_in(seed_dir(tmp_path, seed)) == rounds
    # the free seeds of the refused set were not started: no run dir was made for them
    assert not list(tmp_path.glob("race/frozenlake/sgd/*/seed4")) and not list(tmp_path.glob("race/**/seed5"))


@pytest.mark.parametrize("engine", [("engine=default",), ("engine=stacked", "seeds=[0,1]")])
def test_a_writer_killed_with_sigkill_does_not_block_the_resume(tmp_path, engine):
    first = start(tmp_path, *engine)
    run_dir = wait_for_dir(tmp_path, 0, first)
    wait_until_held(run_dir, first)
    while len(rounds_in(run_dir)) < 3:  # a checkpoint written: there is a round to resume from
        time.sleep(0.02)
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=60)
    killed_at = len(rounds_in(run_dir))
    resumed = start(tmp_path, *engine)
    wait_until_held(run_dir, resumed)
    while len(rounds_in(run_dir)) <= killed_at:  # it trains on past the killed writer's last round
        time.sleep(0.02)
    assert f"resuming {run_dir} at round " in stop(resumed)
    rounds = rounds_in(run_dir)
    assert rounds == list(range(len(rounds)))


def test_the_lock_is_the_run_dirs_own_and_released_with_the_block(tmp_path):
    held, free = tmp_path / "held", tmp_path / "free"
    with sole_writer([held], str(tmp_path)):
        with pytest.raises(RunDirBusy, match=f"{held} is being trained by another process"):
            with sole_writer([free, held], str(tmp_path)):
                pass
        assert not free.exists()  # a run dir that did not exist is tried after the existing ones
        with sole_writer([free], str(tmp_path)):
            pass
    with sole_writer([held, free], str(tmp_path)):  # released when the block ends
        assert (held / WRITER_LOCK).read_text() == f"host {os.uname().nodename}, pid {os.getpid()}\n"
    assert issubclass(RunDirBusy, RunDirError)  # the CLI refuses it in one line with exit code 2
