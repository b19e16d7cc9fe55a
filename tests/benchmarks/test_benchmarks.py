"""Benchmarks must not rot (issue 43): every script under benchmarks/ runs in its small mode, the command
benchmarks/README.md gives ("Smoke runs"), to its end, printing what it compares. Never a time: the numbers
of a run of seconds on a shared machine mean nothing."""

from __future__ import annotations

import runpy
import shlex
import subprocess
import sys

import pytest
import torch

from rlinfluence.config.paths import REPO_ROOT

BENCHMARKS = REPO_ROOT / "benchmarks"
README = (BENCHMARKS / "README.md").read_text()
# What each script's small mode prints last: its ratios, or the rows it measured.
PRINTS = {
    "round_speed.py": "to our IIF",  # the last arm its --filters prints
    "sb3_iif_speed.py": "ratio to stock",
    "batched_seeds.py": "ratio to today",
    "highway_speed.py": "speed-up",
    "minigrid_speed.py": "speed-up",
    "highway_release_probe.py": "'round': 1",
    "sb3_iif_study.py": "final test return",
}
# Scripts that need what the repo cannot hold: the authors' release and its venv (README of the folder).
NEEDS_THE_AUTHORS_RELEASE = {"authors_pipeline/driver.py", "authors_pipeline/convert.py"}
# Scripts that compare with stable-baselines3 (the `bench` extra): skipped where `.[dev]` alone is installed.
NEEDS_SB3 = {script for script in PRINTS if "stable_baselines3" in (BENCHMARKS / script).read_text()}


def smoke_commands() -> dict[str, list[str]]:
    """The README's smoke commands, `python benchmarks/<script> <args>` in backquotes, by script."""
    section = README.split("## Smoke runs")[1].split("\n## ")[0]
    commands = [shlex.split(line.split("`")[1]) for line in section.splitlines() if line.startswith("| `python ")]
    return {command[1].removeprefix("benchmarks/"): command[2:] for command in commands}


def test_every_benchmark_script_has_a_smoke_run_or_says_why_not():
    scripts = {
        path.relative_to(BENCHMARKS).as_posix()
        for path in BENCHMARKS.rglob("*.py")
        if 'if __name__ == "__main__":' in path.read_text()
    }
    assert scripts - NEEDS_THE_AUTHORS_RELEASE == set(smoke_commands()) == set(PRINTS)


@pytest.mark.parametrize("script", sorted(PRINTS))
def test_a_benchmarks_smoke_run_finishes_and_prints_what_it_compares(script, tmp_path, monkeypatch, capfd):
    """In this process (the imports are paid once); the scripts set torch's threads to one, restored after."""
    if script in NEEDS_SB3:
        pytest.importorskip("stable_baselines3", reason=f"{script} compares with stable-baselines3 (the bench extra)")
    args = [arg.replace("/tmp/", f"{tmp_path}/") for arg in smoke_commands()[script]]  # its --out, if any
    monkeypatch.setattr(sys, "argv", [script, *args])
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # as `python benchmarks/<script>`: its siblings import
    threads = torch.get_num_threads()
    try:
        runpy.run_path(str(BENCHMARKS / script), run_name="__main__")
    finally:
        torch.set_num_threads(threads)
    printed = capfd.readouterr()
    assert PRINTS[script] in printed.out + printed.err, printed


def test_round_speed_times_an_image_env_without_an_sb3_peer_and_says_why(monkeypatch, capfd):
    """MiniGrid's and DoorKey's CNN have no SB3 MlpPolicy peer: the script skips SB3 there instead of crashing."""
    args = ["--rounds", "1", "--envs", "minigrid", "--n-steps", "64", "--eval-episodes", "2"]
    monkeypatch.setattr(sys, "argv", ["round_speed.py", *args])
    threads = torch.get_num_threads()
    try:
        runpy.run_path(str(BENCHMARKS / "round_speed.py"), run_name="__main__")
    finally:
        torch.set_num_threads(threads)
    printed = capfd.readouterr().out
    assert "SB3 PPO    not timed: the preset's image network has no SB3 MlpPolicy peer" in printed
    assert "ratio to our PPO" in printed and "speed-up vs SB3 PPO" not in printed


def test_without_stable_baselines3_the_smoke_runs_that_need_it_skip_saying_why():
    """As with `pip install -e ".[dev]"` alone: SB3 cannot be imported in the pytest run below."""
    ids = [f"{__file__}::test_a_benchmarks_smoke_run_finishes_and_prints_what_it_compares[{s}]" for s in NEEDS_SB3]
    code = "import sys, pytest; sys.modules['stable_baselines3'] = None; sys.exit(pytest.main(sys.argv[1:]))"
    result = subprocess.run(
        [sys.executable, "-c", code, "-n", "0", "-p", "no:cacheprovider", "-rs", *ids],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0 and f"{len(ids)} skipped" in result.stdout, result.stdout[-3000:]
    assert result.stdout.count("compares with stable-baselines3 (the bench extra)") == len(ids)
