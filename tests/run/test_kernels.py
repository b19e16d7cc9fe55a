"""The CLI pins its floating-point kernels before torch loads (rlinfluence/kernels.py, issue 56), unless
RLINFLUENCE_KERNELS=native, and every run records the kernels, CPU, threads and device that made it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import cli_refusal, cli_run
from rlinfluence.config.paths import REPO_ROOT
from rlinfluence.figures.runs import tidy_csv_bytes, tidy_from_runs
from rlinfluence.kernels import PIN, UNKNOWN_CLASS, cpu_model, hardware_class

PINNED_LIBRARIES = "ATen DEFAULT, MKL_CBWR=COMPATIBLE, ONEDNN_MAX_CPU_ISA=AVX2"


@pytest.mark.parametrize("setting", ["pinned", "native"])
def test_a_cli_run_records_the_kernels_it_ran_and_its_rows_carry_them(tmp_path, setting):
    unpinned = [option for name in PIN for option in ("-u", name)]  # as a shell that never ran rlinfluence
    ran = cli_run(tmp_path, "debug=smoke", prefix=("env", *unpinned, f"RLINFLUENCE_KERNELS={setting}"))
    assert ran.returncode == 0, ran.stderr
    [summary] = tmp_path.rglob("summary.json")
    [process] = json.loads(summary.read_text())["provenance"]
    if setting == "pinned":  # the same on every x86-64 CPU with AVX2, whatever it is
        assert process["kernels"] == f"pinned: {PINNED_LIBRARIES}"
    else:  # what the libraries chose on this CPU, which is never ATen's baseline on one with AVX2
        assert process["kernels"].startswith("native: ATen AVX") and "MKL_CBWR unset" in process["kernels"]
    assert (process["cpu"], process["threads"], process["device"]) == (cpu_model(), 1, "cpu")
    rows = tidy_from_runs(tmp_path)
    assert set(rows["kernels"]) == {process["kernels"]} and set(rows["threads"]) == {"1"}
    header = tidy_csv_bytes(rows).decode().splitlines()[0]
    assert header.endswith("code_commit,code_dirty,versions,cpu,kernels,threads,device,run_dir")


def test_an_unknown_kernels_setting_is_refused_in_one_line_before_anything_runs(tmp_path):
    line = cli_refusal(cli_run(tmp_path, "debug=smoke", prefix=("env", "RLINFLUENCE_KERNELS=fast")))
    assert line == "rlinfluence: RLINFLUENCE_KERNELS='fast' is not one of: pinned (the default), native"
    assert list(tmp_path.iterdir()) == []


def test_an_adam_runs_pinned_class_is_its_cpu_vendors():
    """Adam's step rounds differently on AMD and Intel under the pinned kernels (docs/reproduction.md), SGD's not."""
    pinned = f"pinned: {PINNED_LIBRARIES}"
    zen3, zen5, intel = "AMD EPYC (family 25, model 1)", "AMD EPYC (family 26, model 2)", "Intel(R) Xeon(R) Processor"
    assert hardware_class(zen3, pinned, "cpu", "adam") == hardware_class(zen5, pinned, "cpu", "adam")
    assert hardware_class(zen3, pinned, "cpu", "adam") != hardware_class(intel, pinned, "cpu", "adam")
    assert hardware_class(intel, pinned, "cpu", "adam") == (
        f"the pinned kernels ({PINNED_LIBRARIES}) on an Intel CPU (Adam)"
    )
    assert hardware_class(zen3, pinned, "cpu", "sgd") == hardware_class(intel, pinned, "cpu", "sgd")


def test_the_pinned_kernels_are_one_class_on_every_cpu_and_native_ones_a_class_per_cpu():
    pinned = f"pinned: {PINNED_LIBRARIES}"
    native = "native: ATen AVX512, MKL_CBWR unset, ONEDNN_MAX_CPU_ISA unset"
    assert hardware_class("AMD EPYC (family 25, model 1)", pinned, "cpu") == hardware_class(
        "Intel(R) Xeon(R) (family 6, model 143)", pinned, "cpu"
    )
    assert hardware_class("AMD EPYC (family 25, model 1)", native, "cpu") != hardware_class(
        "AMD EPYC (family 26, model 2)", native, "cpu"
    )
    assert hardware_class("AMD EPYC (family 26, model 2)", native, "cpu") == (
        f"AMD EPYC (family 26, model 2) with native kernels ({native.removeprefix('native: ')})"
    )
    assert hardware_class("AMD EPYC", pinned, "cuda (NVIDIA H100 80GB HBM3)") == "cuda (NVIDIA H100 80GB HBM3)"
    assert hardware_class(None, None, None) == UNKNOWN_CLASS


def test_round_speed_times_pinned_and_native_kernels_each_in_its_own_process():
    """benchmarks/round_speed.py --kernels (its smoke size): the ratio, and each child's kernels as it ran them."""
    unpinned = {name: value for name, value in os.environ.items() if name not in PIN}
    ran = subprocess.run(
        [sys.executable, "benchmarks/round_speed.py", "--kernels", "--rounds", "1", "--envs", "frozenlake"]
        + ["--n-steps", "64"],
        cwd=REPO_ROOT,
        env=unpinned,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert ran.returncode == 0, ran.stderr
    lines = ran.stdout.splitlines()
    assert any(line.startswith("  our IIF  pinned") and "ratio" in line for line in lines), ran.stdout
    assert f"  iif pinned   pinned: {PINNED_LIBRARIES}" in lines, ran.stdout
    assert any(line.startswith("  iif native   native: ATen AVX") for line in lines), ran.stdout
