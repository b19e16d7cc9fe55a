"""Each run has its own directory (run/rundir.py, run/checkpoint.py): another setting is another run dir,
force=true deletes only its own, and a damaged checkpoint or metrics file is named in one line (issue 9)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import FROZENLAKE_STATE_0, cli_run, refusal, rounds_in, tiny
from rlinfluence.cli import run_task
from rlinfluence.run.checkpoint import RunDirError
from rlinfluence.run.rundir import run_dir


def test_the_readmes_target_action_example_trains_after_the_default_job(tmp_path):
    default = tiny(tmp_path)
    assert run_task(default)["done"]
    action = tiny(tmp_path, "target=action", FROZENLAKE_STATE_0, "target.action=[2]")
    summary = run_task(action)
    assert summary is not None and summary["done"]  # it trained: not "already finished"
    assert run_dir(action) != run_dir(default) and (run_dir(action) / "DONE").exists()


def test_a_sweep_never_reuses_a_run_with_other_settings(tmp_path):
    result = cli_run(tmp_path, "-m", "debug=smoke", "method=ppo", "env.rounds=1,2")
    assert result.returncode == 0, result.stderr
    dirs = sorted(path.parent for path in tmp_path.rglob("DONE"))
    assert len(dirs) == 2 and sorted(len(rounds_in(path)) for path in dirs) == [2, 3]


def test_force_deletes_only_its_own_run(tmp_path):
    three = tiny(tmp_path, "env.rounds=3")
    run_task(three)
    before = {path.name: path.read_bytes() for path in run_dir(three).iterdir() if path.is_file()}
    run_task(tiny(tmp_path, "env.rounds=1", "force=true"))
    assert {path.name: path.read_bytes() for path in run_dir(three).iterdir() if path.is_file()} == before


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
