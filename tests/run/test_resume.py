"""A run killed with SIGKILL at any point resumes to exactly the metrics (and per-round snapshots) of an
uninterrupted run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from conftest import metrics_rows

ROUNDS = 8


def command(runs_root: Path, env: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "rlinfluence",
        f"env={env}",
        "method=iif",
        "env.n_steps=256",
        f"env.rounds={ROUNDS}",
        "ppo.batch_size=64",
        "eval.episodes=8",
        "eval.n_parallel=4",
        "logger=disabled",
        "progress=false",
        f"runs_root={runs_root}",
        "seed=5",
        "checkpoint.snapshots=true",
    ]


def metrics(runs_root: Path) -> list[dict[str, str]]:
    return metrics_rows(next(runs_root.rglob("metrics.csv")).parent, timings=False)


def snapshot_weights(runs_root: Path) -> list[dict[str, torch.Tensor]]:
    paths = sorted(runs_root.rglob("snapshots/round*.pt"))
    return [torch.load(path, weights_only=False)["model"] for path in paths]


def rounds_logged(runs_root: Path) -> int:
    paths = list(runs_root.rglob("metrics.csv"))
    return max(len(paths[0].read_text().splitlines()) - 1, 0) if paths else 0


@pytest.mark.parametrize("env", ["frozenlake", "lunarlander"])  # lunarlander: episodes span rounds
def test_kill_minus_9_then_rerun_equals_uninterrupted_run(tmp_path, env):
    subprocess.run(command(tmp_path / "reference", env), check=True, capture_output=True, timeout=300)

    interrupted = tmp_path / "interrupted"
    for kill_after_rounds in (2, 5):  # two kills at different points of the run
        process = subprocess.Popen(command(interrupted, env), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 240
        while rounds_logged(interrupted) < kill_after_rounds and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        assert rounds_logged(interrupted) < ROUNDS + 1, "the run finished before it could be killed"
    subprocess.run(command(interrupted, env), check=True, capture_output=True, timeout=300)

    assert metrics(interrupted) == metrics(tmp_path / "reference")
    reference, resumed = snapshot_weights(tmp_path / "reference"), snapshot_weights(interrupted)
    assert len(resumed) == ROUNDS + 1
    assert all(torch.equal(a[name], b[name]) for a, b in zip(reference, resumed, strict=True) for name in a)
    assert next(interrupted.rglob("DONE"))


def test_a_run_killed_after_its_last_checkpoint_finishes_with_its_summary(tmp_path, tiny_config):
    """Killed between the final checkpoint and DONE: the rerun only writes the summary and DONE."""
    from rlinfluence.cli import run_task

    cfg = tiny_config("env=frozenlake")
    finished = run_task(cfg, tmp_path)
    (tmp_path / "DONE").unlink()
    (tmp_path / "summary.json").unlink()
    assert run_task(cfg, tmp_path) == finished and (tmp_path / "DONE").exists()
