"""Both SLURM paths against a real cluster: manifest + `sbatch --array`, and `launcher=slurm`.

Needs `sbatch` on PATH, SLURM_CONF pointing at the cluster and a controller that answers;
otherwise every test here is skipped with the reason. On one machine:

    sbatch/local-cluster.sh up && eval "$(sbatch/local-cluster.sh env)" && pytest -m slurm

Jobs run in the default partition with 1 CPU and 1 GB each; site settings from
conf/local/launcher/slurm.yaml apply as they do for users.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import compose_config, metrics_rows
from rlinfluence.launch import slurm
from rlinfluence.run.rundir import run_dir as run_dir_of


def _why_no_slurm() -> str | None:
    if shutil.which("sbatch") is None:
        return "sbatch is not on PATH"
    if not os.environ.get("SLURM_CONF"):
        return 'SLURM_CONF is not set (for a local cluster: eval "$(sbatch/local-cluster.sh env)")'
    ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=30)
    if ping.returncode != 0 or "UP" not in ping.stdout:
        return f"no SLURM controller answers `scontrol ping` ({(ping.stdout + ping.stderr).strip()})"
    return None


WHY_NO_SLURM = _why_no_slurm()
pytestmark = [
    pytest.mark.slurm,
    pytest.mark.xdist_group("slurm"),  # one worker: the tests share the cluster's few CPUs and watch its queue
    pytest.mark.skipif(
        WHY_NO_SLURM is not None,
        reason=f"needs a SLURM cluster: {WHY_NO_SLURM}; start one with sbatch/local-cluster.sh up",
    ),
]

TINY = [
    "env=frozenlake",
    "method=ppo",
    "env.rounds=2",
    "env.n_steps=128",
    "ppo.batch_size=64",
    "eval.episodes=5",
    "logger=disabled",
    "progress=false",
]
LONG = [*TINY[:2], "env.rounds=100", "env.n_steps=256", *TINY[4:]]  # ~20 s: long enough to preempt
SMALL_JOBS = ["--mem=1G", "--time=10"]
SMALL_SUBMITIT_JOBS = ["hydra.launcher.mem_gb=1", "hydra.launcher.timeout_min=10"]
TIMEOUT = 600


def _run_dir(workdir: Path, overrides: list[str], experiment: str, seed: int) -> Path:
    return workdir / run_dir_of(compose_config([*overrides, f"experiment_name={experiment}", f"seed={seed}"]))


def _command(script: str, module: str) -> list[str]:
    """A console script as a shell runs it (a fresh interpreter), or its `python -m` where it is not installed."""
    path = Path(sys.executable).with_name(script)
    return [str(path)] if path.exists() else [sys.executable, "-m", module]


def _rlinfluence() -> list[str]:
    return _command("rlinfluence", "rlinfluence")


def _manifest_tool(*args: str) -> subprocess.CompletedProcess:
    """`rlinfluence-manifest <args>` from the shell (in-process calls once hid that it failed there)."""
    command = [*_command("rlinfluence-manifest", "rlinfluence.launch"), *args]
    result = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT)
    assert result.returncode == 0, result.stderr
    return result


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


# ----------------------------------------------------------------------------- helpers


def _squeue_states(job: str) -> dict[str, str]:
    out = subprocess.run(
        ["squeue", "--noheader", "--array", "--jobs", job, "--format=%i %T"], capture_output=True, text=True
    )
    return dict(line.split() for line in out.stdout.splitlines()) if out.returncode == 0 else {}


def _wait(condition, what: str, timeout: float = TIMEOUT, every: float = 0.5):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(every)


def _wait_until_finished(jobs: list[str]) -> None:
    _wait(lambda: not any(_squeue_states(job) for job in jobs), f"jobs {jobs} to leave the queue")


def _final_states(job: str, n_tasks: int) -> dict[str, str]:
    """Accounting states of an array's tasks (sacct lags the queue by about a second)."""

    def states():
        out = subprocess.run(
            ["sacct", "--noheader", "--allocations", "--parsable2", "--jobs", job, "--format=JobID,State"],
            capture_output=True,
            text=True,
        )
        found = dict(line.split("|")[:2] for line in out.stdout.splitlines() if line)
        final = len(found) == n_tasks and not any(s in ("PENDING", "RUNNING", "REQUEUED") for s in found.values())
        return found if final else None

    return _wait(states, f"accounting records of job {job}", timeout=60)


def _resumed(before: str, after: str) -> bool:
    """metrics.csv text before a requeue and after the run finished: resumed, not restarted.

    Rows up to the last checkpoint are kept verbatim, wall-clock columns included (a restart would
    recompute them with new timings). The row written when the signal came may be after the last
    checkpoint: then it is recomputed, identical apart from its wall-clock columns."""
    old, new = before.splitlines(), after.splitlines()
    header = old[0].split(",")
    clock = {i for i, name in enumerate(header) if name.startswith("time_")}

    def without_clock(line: str) -> list[str]:
        return [value for i, value in enumerate(line.split(",")) if i not in clock]

    return (
        len(new) > len(old)
        and new[: len(old) - 1] == old[:-1]
        and without_clock(new[len(old) - 1]) == without_clock(old[-1])
    )


def _assert_finished_run(run_dir: Path, rounds: int) -> None:
    assert (run_dir / "DONE").exists(), f"{run_dir} has no DONE marker"
    assert (run_dir / "summary.json").exists() and (run_dir / ".hydra" / "config.yaml").exists()
    assert [int(row["round"]) for row in metrics_rows(run_dir)] == list(range(rounds + 1))


def _submitted_jobs(output: str) -> list[str]:
    return [line.split("\t")[0] for line in output.splitlines() if "\tarray " in line]


def _wait_until_requeued(task: str) -> None:
    _wait(lambda: _squeue_states(task).get(task) == "PENDING", f"{task} to be requeued", timeout=120)
    time.sleep(3)  # see _release


def _release(task: str) -> None:
    """SLURM holds a requeued job back for ~2 minutes (BeginTime); let it start now. (Not right
    after the requeue: slurmd refuses to launch a job again within the second its old credential
    was revoked -- "Job credential revoked" -- and the task would fail.)"""
    subprocess.run(["scontrol", "update", f"JobId={task}", "StartTime=now"], check=True)


# ----------------------------------------------------------------------------- manifest + sbatch


def test_manifest_array_runs_and_resubmission_skips_finished_runs(workdir):
    """The README's commands, from the shell: make, submit, status, and submit again."""
    manifest = workdir / "manifests" / "tiny.txt"
    _manifest_tool("make", *TINY, "seed=0,1,2", "experiment_name=slurm_sbatch", "-o", str(manifest))

    jobs = _submitted_jobs(_manifest_tool("submit", str(manifest), "--parallel", "3", "--", *SMALL_JOBS).stdout)
    assert len(jobs) == 1
    _wait_until_finished(jobs)
    assert _final_states(jobs[0], 3) == {f"{jobs[0]}_{i}": "COMPLETED" for i in range(3)}
    for seed in range(3):
        _assert_finished_run(_run_dir(workdir, TINY, "slurm_sbatch", seed), rounds=2)
    logs = sorted((workdir / "manifests" / "logs" / "tiny").glob("*.out"))
    assert len(logs) == 3 and all("run finished with exit status 0" in p.read_text() for p in logs)

    assert "3 runs: 3 done, 0 queued or running, 0 to do" in _manifest_tool("status", str(manifest)).stdout
    # The same manifest again: everything is done, nothing is submitted.
    out = _manifest_tool("submit", str(manifest), "--parallel", "3", "--", *SMALL_JOBS).stdout
    assert "3 runs: 3 done, 0 queued or running, 0 to do" in out
    assert _submitted_jobs(out) == []


def test_manifest_split_into_several_arrays(workdir, capsys):
    """More runs than MaxArraySize: chained arrays, every run exactly once."""
    manifest = workdir / "split.txt"
    assert slurm.main(["make", *TINY, "seed=0,1,2", "experiment_name=slurm_split", "-o", str(manifest)]) == 0
    capsys.readouterr()
    assert slurm.main(["submit", str(manifest), "--parallel", "2", "--max-array-size", "2", "--", *SMALL_JOBS]) == 0
    jobs = _submitted_jobs(capsys.readouterr().out)
    assert len(jobs) == 2
    _wait_until_finished(jobs)
    assert _final_states(jobs[0], 2) == {f"{jobs[0]}_0": "COMPLETED", f"{jobs[0]}_1": "COMPLETED"}
    assert _final_states(jobs[1], 1) == {f"{jobs[1]}_0": "COMPLETED"}
    for seed in range(3):
        _assert_finished_run(_run_dir(workdir, TINY, "slurm_split", seed), rounds=2)


def test_a_manifest_task_runs_a_block_of_seeds_in_one_process(workdir):
    """engine=stacked seed blocks: 4 seeds in 2 array tasks, each seed its own finished run."""
    manifest = workdir / "manifests" / "blocks.txt"
    stacked = [*TINY, "engine=stacked", "experiment_name=slurm_blocks"]
    _manifest_tool("make", "-m", *stacked, "seed=range(4)", "--seeds-per-task", "2", "-o", str(manifest))
    (job,) = _submitted_jobs(_manifest_tool("submit", str(manifest), "--parallel", "2", "--", *SMALL_JOBS).stdout)
    _wait_until_finished([job])
    assert _final_states(job, 2) == {f"{job}_{i}": "COMPLETED" for i in range(2)}
    for seed in range(4):
        run_dir = _run_dir(workdir, [*TINY, "engine=stacked"], "slurm_blocks", seed)
        _assert_finished_run(run_dir, rounds=2)
        assert json.loads((run_dir / "summary.json").read_text())["seed"] == seed
    logs = sorted((workdir / "manifests" / "logs" / "blocks").glob("*.out"))
    assert len(logs) == 2 and all("seeds=[" in p.read_text() for p in logs)
    assert "4 runs in 2 tasks: 4 done, 0 queued or running, 0 to do" in _manifest_tool("status", str(manifest)).stdout


@pytest.mark.slow
def test_sbatch_task_requeued_on_usr1_resumes_from_its_checkpoint(workdir, capsys):
    manifest = workdir / "long.txt"
    assert slurm.main(["make", *LONG, "seed=0", "experiment_name=slurm_requeue", "-o", str(manifest)]) == 0
    capsys.readouterr()
    assert slurm.main(["submit", str(manifest), "--", *SMALL_JOBS]) == 0
    (job,) = _submitted_jobs(capsys.readouterr().out)
    task, run_dir = f"{job}_0", _run_dir(workdir, LONG, "slurm_requeue", 0)
    _wait(lambda: (run_dir / "metrics.csv").exists() and len(metrics_rows(run_dir)) >= 3, "the run to log rounds")

    # What SLURM sends before a time limit (--signal=B:USR1@180), or an operator by hand.
    subprocess.run(["scancel", "--batch", "--signal=USR1", task], check=True)
    _wait_until_requeued(task)
    before = (run_dir / "metrics.csv").read_text()
    _release(task)
    _wait_until_finished([job])

    _assert_finished_run(run_dir, rounds=100)
    after = (run_dir / "metrics.csv").read_text()
    assert _resumed(before, after)
    log = next((workdir / "logs" / "long").glob("*.out")).read_text()
    assert "caught SIGUSR1" in log and f"requeued {task}" in log and "restart 1" in log
    assert _final_states(job, 1) == {task: "COMPLETED"}


# ----------------------------------------------------------------------------- launcher=slurm


def test_hydra_slurm_launcher_runs_the_sweep_as_an_array(workdir):
    subprocess.run(
        [
            *_rlinfluence(),
            "-m",
            *TINY,
            "seed=0,1,2",
            "experiment_name=slurm_submitit",
            "launcher=slurm",
            *SMALL_SUBMITIT_JOBS,
        ],
        cwd=workdir,
        check=True,
        timeout=TIMEOUT,
    )
    sweep = workdir / "runs" / "slurm_submitit"
    for seed in range(3):
        _assert_finished_run(_run_dir(workdir, TINY, "slurm_submitit", seed), rounds=2)
    results = sorted((sweep / ".submitit").glob("*/*_result.pkl"))
    assert len(results) == 3
    for path in results:
        status, _ = pickle.loads(path.read_bytes())
        assert status == "success"
    (array,) = {p.parent.name.split("_")[0] for p in results}  # one array of three tasks
    assert _final_states(array, 3) == {f"{array}_{i}": "COMPLETED" for i in range(3)}


def test_hydra_slurm_launcher_packs_a_stacked_seed_sweep_into_one_job(workdir):
    stacked = [*TINY, "engine=stacked", "experiment_name=slurm_submitit_stacked"]
    subprocess.run(
        [*_rlinfluence(), "-m", *stacked, "seed=0,1", "launcher=slurm", *SMALL_SUBMITIT_JOBS],
        cwd=workdir,
        check=True,
        timeout=TIMEOUT,
    )
    for seed in range(2):
        _assert_finished_run(_run_dir(workdir, [*TINY, "engine=stacked"], "slurm_submitit_stacked", seed), rounds=2)
    # one submitit job (a sweep of one is a plain job, no array) trained both seeds
    (result,) = (workdir / "runs" / "slurm_submitit_stacked" / ".submitit").glob("*/*_result.pkl")
    status, _ = pickle.loads(result.read_bytes())
    assert status == "success"


@pytest.mark.slow
def test_hydra_slurm_job_requeued_on_preemption_resumes(workdir):
    sweep = workdir / "runs" / "slurm_submitit_requeue"
    run_dir = _run_dir(workdir, LONG, "slurm_submitit_requeue", 0)
    driver = subprocess.Popen(
        [
            *_rlinfluence(),
            "-m",
            *LONG,
            "seed=0",
            "experiment_name=slurm_submitit_requeue",
            "launcher=slurm",
            *SMALL_SUBMITIT_JOBS,
        ],
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        _wait(lambda: (run_dir / "metrics.csv").exists() and len(metrics_rows(run_dir)) >= 3, "the run to log rounds")
        # submitit submits a sweep of one as a plain job (no array): its folder is the job id
        (task,) = [p.name for p in (sweep / ".submitit").iterdir() if p.is_dir()]
        # submitit's preemption/time-out signal (what SLURM sends signal_delay_s before the limit)
        subprocess.run(["scancel", "--signal=USR2", task], check=True)
        _wait_until_requeued(task)
        before = (run_dir / "metrics.csv").read_text()
        _release(task)
        output, _ = driver.communicate(timeout=TIMEOUT)
    finally:
        if driver.poll() is None:
            driver.kill()
    assert driver.returncode == 0, output
    _assert_finished_run(run_dir, rounds=100)
    after = (run_dir / "metrics.csv").read_text()
    assert _resumed(before, after)
    log = next((sweep / ".submitit" / task).glob("*_log.err")).read_text()
    assert "Caught signal SIGUSR2" in log
