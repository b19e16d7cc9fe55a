"""Benchmarks must not rot (issue 43): every script under benchmarks/ runs in its small mode, the command
benchmarks/README.md gives ("Smoke runs"), to its end, printing what it compares. Never a time: the numbers
of a run of seconds on a shared machine mean nothing."""

from __future__ import annotations

import importlib
import re
import runpy
import shlex
import subprocess
import sys
import time

import pytest
import torch

from rlinfluence.config.paths import REPO_ROOT
from rlinfluence.round import Stopwatch

BENCHMARKS = REPO_ROOT / "benchmarks"
README = (BENCHMARKS / "README.md").read_text()
# What each script's small mode prints last: its ratios, or the rows it measured.
PRINTS = {
    "round_speed.py": "to our IIF",  # the last arm its --filters prints
    "sb3_iif_speed.py": "ratio to stock",
    "batched_seeds.py": "ratio to alone",
    "stacked_rounds.py": "| target (N = 16) |",  # its table's header, before the rows
    "weight_layouts.py": "input gradient",
    "stack_memory.py": "| frozenlake |",  # its row
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


def run_benchmark(script: str, args: list[str], monkeypatch, capfd):
    """`python benchmarks/<script> <args>` in this process (the imports are paid once); what it printed. The scripts
    set torch's threads to one, restored after."""
    monkeypatch.setattr(sys, "argv", [script, *args])
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # as `python benchmarks/<script>`: its siblings import
    threads = torch.get_num_threads()
    try:
        runpy.run_path(str(BENCHMARKS / script), run_name="__main__")
    finally:
        torch.set_num_threads(threads)
    return capfd.readouterr()


@pytest.mark.parametrize("script", sorted(PRINTS))
def test_a_benchmarks_smoke_run_finishes_and_prints_what_it_compares(script, tmp_path, monkeypatch, capfd):
    if script in NEEDS_SB3:
        pytest.importorskip("stable_baselines3", reason=f"{script} compares with stable-baselines3 (the bench extra)")
    args = [arg.replace("/tmp/", f"{tmp_path}/") for arg in smoke_commands()[script]]  # its --out, if any
    printed = run_benchmark(script, args, monkeypatch, capfd)
    assert PRINTS[script] in printed.out + printed.err, printed


def test_round_speed_times_an_image_env_without_an_sb3_peer_and_says_why(monkeypatch, capfd):
    """MiniGrid's and DoorKey's CNN have no SB3 MlpPolicy peer: the script skips SB3 there instead of crashing."""
    args = ["--rounds", "1", "--envs", "minigrid", "--n-steps", "64", "--eval-episodes", "2"]
    printed = run_benchmark("round_speed.py", args, monkeypatch, capfd).out
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


def test_stacked_rounds_prints_every_stage_the_floor_and_a_table_row_per_n(monkeypatch, capfd):
    """Both arms' seed-rounds per CPU-second and their ratio for each stage and the whole round, the env-step floor
    (library and batched) and each arm's cost over it, and the table's every column, filled, for each N."""
    args = ["--envs", "frozenlake", "--seeds", "1", "2", "--rounds", "1", "--n-steps", "64", "--eval-episodes", "2"]
    printed = run_benchmark("stacked_rounds.py", args, monkeypatch, capfd).out
    assert Stopwatch.clock is time.perf_counter  # it read the stages on the CPU clock, and gave the runs' clock back
    assert re.search(r"^command: python \S*stacked_rounds.py --envs frozenlake --seeds 1 2 ", printed, re.M)
    assert re.search(r"^machine: .+ CPUs, load average .+; torch .+, 1 thread; code ", printed, re.M)
    stages = ["collect", "influence", "select", "update", "evaluate", "round"]
    for stage in stages:
        assert len(re.findall(rf"^  {stage} +alone +[0-9.]+ +stacked +[0-9.]+ +ratio [0-9.]+x$", printed, re.M)) == 2
    assert len(re.findall(r"^  floor .* library [0-9.]+ s, batched [0-9.]+ s$", printed, re.M)) == 2
    for arm in ("alone", "stacked"):
        over_floor = rf"^  {arm} +per-seed round cost [0-9.]+ s = [0-9.]+x the library floor, [0-9.]+x the batched"
        assert len(re.findall(over_floor, printed, re.M)) == 2
    header, rule, *rows = printed.strip().splitlines()[-4:]
    columns = [cell.strip() for cell in header.strip("|").split("|")]
    assert columns[:3] == ["env", "N", "round: alone → stacked"]
    assert columns[3:8] == [f"{stage} ratio" for stage in stages[:-1]]
    floors = ["floor s/seed: library / batched", "stacked round / floor: library / batched"]
    assert columns[8:] == [*floors, "target (N = 16)"]
    assert rule == "|" + "---|" * len(columns)
    for n, row in zip((1, 2), rows):
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert cells[:2] == ["frozenlake", str(n)] and len(cells) == len(columns)
        assert all(re.search(r"[0-9]", cell) for cell in cells[2:-1]), row  # every measured column filled
        assert cells[-1] == "—"  # the targets are N = 16's


def test_stacked_rounds_prints_the_engines_refusal_in_place_of_a_setting_it_cannot_run(monkeypatch, capfd):
    """An env the stacked engine does not run (the language-model world): its one-line reason, as check_engine gives
    it, and no crash."""
    from rlinfluence.choices import ConfigError
    from rlinfluence.config.engines import check_engine

    monkeypatch.syspath_prepend(str(BENCHMARKS))
    stacked_rounds = importlib.import_module("stacked_rounds")
    with pytest.raises(ConfigError) as refusal:
        check_engine(stacked_rounds.settings("toxicity_tiny", "iif", 2, 64, 2))
    args = ["--envs", "toxicity_tiny", "--seeds", "2", "--n-steps", "64", "--eval-episodes", "2"]
    printed = run_benchmark("stacked_rounds.py", args, monkeypatch, capfd).out
    assert f"  refused: {refusal.value}\n" in printed
    assert f"| toxicity_tiny | 2 | refused: {refusal.value} |" in printed


def test_stacked_rounds_judges_the_targets_at_16_seeds_against_the_lower_floor(monkeypatch):
    """The speed-up target on the whole round's ratio; the floor target on the stacked per-seed cost over the lower
    of the two floors (the batched simulator's where the env has one); no target below N = 16."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    stacked_rounds = importlib.import_module("stacked_rounds")

    def row(env: str, n: int, alone: float, stacked: float, batched_floor: float) -> str:
        measured = stacked_rounds.Measured(library_floor=[0.1], batched_floor=[batched_floor])
        measured.rounds["alone"]["round"], measured.rounds["stacked"]["round"] = [alone * n], [stacked * n]
        return stacked_rounds.Row(env, n, measured=measured).target()

    assert row("acrobot", 16, alone=1.0, stacked=0.1, batched_floor=0.01) == "≥ 8× alone: met (10.00×)"
    assert row("acrobot", 16, alone=1.0, stacked=0.2, batched_floor=0.01) == "≥ 8× alone: not met (5.00×)"
    assert row("lunarlander", 16, alone=1.0, stacked=0.14, batched_floor=float("nan")) == "≤ 1.5× floor: met (1.40×)"
    assert row("lunarlander", 16, alone=1.0, stacked=0.14, batched_floor=0.05) == "≤ 1.5× floor: not met (2.80×)"
    assert row("acrobot", 4, alone=1.0, stacked=0.1, batched_floor=0.01) == "—"
