"""The pinned kernels' promise (rlinfluence/kernels.py): a short run gives the same numbers on any x86-64 CPU
with AVX2, Intel or AMD. Its fingerprint (each round's n_kept and test_return, and a digest of the final policy's
weights, which any difference of rounding changes) is recorded in fingerprint.json with the CPU models it
was checked on; a machine of the pinned class that fails it is a finding (docs/reproduction.md, "Hardware").

    PYTHONPATH=tests python tests/run/test_fingerprint.py   # records it anew on this machine (pinned kernels)
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from importlib import metadata
from pathlib import Path

import pytest

from conftest import compose_config, metrics_rows
from rlinfluence.cli import run_task
from rlinfluence.kernels import PINNED, cpu_model, kernels_in_force
from rlinfluence.run.checkpoint import load_checkpoint
from rlinfluence.run.rundir import run_dir

FIXTURE = Path(__file__).with_name("fingerprint.json")
ENVS = ("frozenlake", "acrobot", "lunarlander")
# Seconds a run: three rounds of 256 records and a few test episodes each.
SHORT = ["debug=smoke", "method=iif", "seed=0", "env.rounds=3", "env.n_steps=256", "eval.episodes=4"]


def fingerprint(env: str, runs_root: Path) -> dict:
    cfg = compose_config([*SHORT, f"env={env}", f"runs_root={runs_root}"])
    run_task(cfg)
    rows = metrics_rows(run_dir(cfg), timings=False)
    checkpoint = load_checkpoint(run_dir(cfg))
    assert checkpoint is not None
    weights = checkpoint["model"]
    digest = hashlib.sha256(b"".join(tensor.numpy().tobytes() for tensor in weights.values())).hexdigest()
    return {
        "n_kept": [int(row["n_kept"]) for row in rows],
        "test_return": [float(row["test_return"]) for row in rows],
        "weights_sha256": digest,
    }


@pytest.mark.parametrize("env", ENVS)
def test_a_pinned_run_gives_the_recorded_fingerprint(env, tmp_path):
    kernels = kernels_in_force()
    if not kernels.startswith(f"{PINNED}:"):
        pytest.skip(f"the fingerprint is the pinned kernels'; this process runs {kernels}")
    recorded = json.loads(FIXTURE.read_text())
    assert fingerprint(env, tmp_path) == recorded["runs"][env], f"on {cpu_model()} ({kernels})"


def record() -> None:
    """fingerprint.json made on this machine, keeping the CPU models it was checked on before."""
    kernels = kernels_in_force()
    if not kernels.startswith(f"{PINNED}:"):
        sys.exit(f"record the fingerprint with the pinned kernels; this process runs {kernels}")
    with tempfile.TemporaryDirectory() as runs_root:
        runs = {env: fingerprint(env, Path(runs_root)) for env in ENVS}
    earlier = json.loads(FIXTURE.read_text()) if FIXTURE.exists() else {"runs": runs, "checked_on": []}
    checked_on = earlier["checked_on"] if earlier["runs"] == runs else []  # a new fingerprint: checked here only
    fixture = {
        "made_by": "PYTHONPATH=tests python tests/run/test_fingerprint.py",
        "settings": SHORT,
        "kernels": kernels,
        "torch": metadata.version("torch"),
        "checked_on": sorted({*checked_on, cpu_model()}),
        "runs": runs,
    }
    FIXTURE.write_text(json.dumps(fixture, indent=1) + "\n")


if __name__ == "__main__":
    record()
