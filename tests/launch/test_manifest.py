"""Sweep manifests (launch/manifest.py, launch/slurm.py): expansion, file format, array splitting, skip-if-done.

None of these need SLURM: `sbatch`/`scontrol` are replaced by small fakes where submission is tested.
tests/launch/test_slurm.py runs the same path against a real cluster.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from rlinfluence.launch import manifest as mf, slurm
from rlinfluence.launch.manifest import (
    ArrayChunk,
    Manifest,
    Run,
    compress_ranges,
    expand_sweep,
    pack_seed_sweep,
    split_into_arrays,
)

REPO = Path(__file__).resolve().parents[2]  # tests/launch/ is two levels below the repo root
SCRIPT = REPO / "sbatch" / "run_array.sbatch"


# ----------------------------------------------------------------------------- expansion


def test_expand_sweep_is_the_cartesian_product_in_key_order():
    params = {"env": "frozenlake,acrobot", "method": "iif,ppo,random", "seed": "range(0,2)"}
    runs = expand_sweep(params, ["+experiment=main", "env.rounds=2"])
    assert len(runs) == 2 * 3 * 2
    # command-line keys first, then the sweep's keys in the overlay's order; the last key varies fastest
    assert runs[0] == ["+experiment=main", "env.rounds=2", "env=frozenlake", "method=iif", "seed=0"]
    assert runs[1] == ["+experiment=main", "env.rounds=2", "env=frozenlake", "method=iif", "seed=1"]
    assert runs[-1] == ["+experiment=main", "env.rounds=2", "env=acrobot", "method=random", "seed=1"]
    assert len({tuple(r) for r in runs}) == len(runs)


def test_command_line_replaces_the_sweep_of_the_same_key():
    params = {"env": "frozenlake,acrobot", "seed": "0,1,2,3,4"}
    assert expand_sweep(params, ["seed=7"]) == [["env=frozenlake", "seed=7"], ["env=acrobot", "seed=7"]]
    assert [r[-1] for r in expand_sweep(params, ["seed=5,6", "env=acrobot"])] == ["seed=5", "seed=6"]


def test_command_line_sweeps_and_no_params():
    assert expand_sweep(None, ["seed=0,1", "method.p=10,20"]) == [
        ["seed=0", "method.p=10"],
        ["seed=0", "method.p=20"],
        ["seed=1", "method.p=10"],
        ["seed=1", "method.p=20"],
    ]
    assert expand_sweep({}, ["env=acrobot"]) == [["env=acrobot"]]
    assert expand_sweep({}, ["-m", "seed=1"]) == [["seed=1"]]  # -m is implied


def test_unsupported_sweeps_are_refused():
    with pytest.raises(ValueError, match="only choice and range"):
        expand_sweep({}, ["optimizer.lr=interval(0.1,0.2)"])
    with pytest.raises(ValueError, match="Hydra's own configuration"):
        expand_sweep({}, ["hydra.launcher.mem_gb=1,2"])


# ----------------------------------------------------------------------------- file format


def test_manifest_round_trip_keeps_quoting_and_run_dirs():
    runs = [
        Run(["+experiment=main", "seed=0"], [Path("runs/main/frozenlake/sgd/ppo/seed0")]),
        Run(["logger.group='a b # c'", "seed=1"], [Path("runs/x y/seed1")]),
        Run(["seed=2"]),
    ]  # a hand-written line without a run dir
    manifest = Manifest(runs, {"commit": "0123456789abcdef0123456789abcdef01234567", "runs": "3"})
    text = manifest.dump()
    back = Manifest.parse(text + "\n# a trailing comment\n\n")
    assert back.runs == runs
    assert back.header["runs"] == "3"
    assert back.commit == "0123456789abcdef0123456789abcdef01234567"
    assert Manifest.parse("# commit: unknown (not a git checkout)\nseed=1\n").commit is None


def test_the_array_script_reads_the_same_runs_as_python(tmp_path):
    """run_array.sbatch (awk + bash) and Manifest.parse must agree on line numbers and words."""
    runs = [
        Run(["env=acrobot", "seed=0"], [Path("runs/a/seed0")]),
        Run(["logger.group='two words # not a comment'", "seed=1"], [Path("runs/b/seed1")]),
        Run(["seed=2"]),
    ]
    text = Manifest(runs, {"commit": "abc1234", "runs": "3"}).dump()
    path = tmp_path / "m.txt"
    path.write_text(text.replace("\nseed=2", "\n# a comment between runs\n\nseed=2"))
    printer = tmp_path / "printer.py"
    printer.write_text("import json, sys\nprint('ARGS ' + json.dumps(sys.argv[1:]))\n")
    for task, offset in ((0, 0), (1, 0), (0, 2)):
        env = dict(
            os.environ,
            SLURM_ARRAY_TASK_ID=str(task),
            RLINF_MANIFEST_OFFSET=str(offset),
            RLINF_CMD=f"{sys.executable} {printer}",
        )
        out = subprocess.run(
            ["bash", str(SCRIPT), path.name], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60
        )
        assert out.returncode == 0, out.stdout + out.stderr
        args = json.loads(next(line for line in out.stdout.splitlines() if line.startswith("ARGS "))[5:])
        assert args == runs[task + offset].overrides
    env = dict(os.environ, SLURM_ARRAY_TASK_ID="3")
    out = subprocess.run(
        ["bash", str(SCRIPT), path.name], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 2 and "has no run line 3" in out.stdout


# ----------------------------------------------------------------------------- arrays


def test_compress_ranges():
    assert compress_ranges([5, 0, 1, 2, 7, 8]) == "0-2,5,7-8"
    assert compress_ranges([3]) == "3"
    assert compress_ranges([]) == ""


def test_split_into_arrays_keeps_every_index_below_max_array_size():
    chunks = split_into_arrays(range(2500), 1001)
    assert [c.offset for c in chunks] == [0, 1001, 2002]
    assert [len(c.indices) for c in chunks] == [1001, 1001, 498]
    assert all(max(c.indices) < 1001 for c in chunks)
    assert [r for c in chunks for r in c.runs] == list(range(2500))
    assert chunks[2].spec == "0-497"


def test_split_into_arrays_with_gaps_from_finished_runs():
    pending = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 1000, 1001, 1002, 1003, 1004, 1005]
    chunks = split_into_arrays(pending, 1001)
    assert chunks == [ArrayChunk(0, tuple(range(10)) + (1000,)), ArrayChunk(1001, (0, 1, 2, 3, 4))]
    assert chunks[0].spec == "0-9,1000"
    assert split_into_arrays([], 10) == []
    with pytest.raises(ValueError):
        split_into_arrays([1], 0)


# ----------------------------------------------------------------------------- the real config


def test_make_manifest_from_the_experiment_overlay(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    manifest = mf.make_manifest(["+experiment=main", "env=frozenlake", "seed=0"])
    # the overlay sweeps env x method x seed; env and seed are pinned on the command line
    assert sorted(r.overrides for r in manifest.runs) == [
        ["+experiment=main", "env=frozenlake", f"method={m}", "seed=0"] for m in ("iif", "ppo", "random")
    ]
    dirs = [d for r in manifest.runs for d in r.run_dirs]
    assert len(set(dirs)) == 3
    assert all(str(d).startswith("runs/main/frozenlake/") and d.name == "seed0" for d in dirs)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True)
    if head.returncode == 0:
        assert manifest.commit == head.stdout.strip()
    assert manifest.header["workdir"] == str(tmp_path)
    assert manifest.header["runs"] == "3"


def test_runs_sharing_a_run_dir_are_kept_once(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    # PPO's run dir does not depend on method.p: these two overrides are one run.
    manifest = mf.make_manifest(["method=ppo", "method.p=10,20", "seed=0"])
    assert len(manifest.runs) == 1
    assert "same run dir" in capsys.readouterr().err


def test_make_cli_writes_a_manifest_and_refuses_to_replace_a_different_one(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "manifests" / "s.txt"
    assert slurm.main(["make", "env=frozenlake", "seed=0,1", "-o", str(out)]) == 0
    text = out.read_text()
    assert text.startswith("# rlinfluence manifest")
    assert "# command: rlinfluence-manifest make env=frozenlake seed=0,1 -o" in text
    assert len(Manifest.read(out).runs) == 2
    assert slurm.main(["make", "env=frozenlake", "seed=0,1", "-o", str(out)]) == 0  # same runs: fine
    assert slurm.main(["make", "env=frozenlake", "seed=0,1,2", "-o", str(out)]) == 2  # refused as given
    assert len(Manifest.read(out).runs) == 2
    assert slurm.main(["make", "env=frozenlake", "seed=0,1,2", "-o", str(out), "--force"]) == 0
    assert len(Manifest.read(out).runs) == 3


def test_launcher_overlays_compose(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with mf.Composer() as composer:
        local = composer.compose(["launcher=local"]).hydra.launcher
        joblib = composer.compose(["launcher=joblib", "hydra.launcher.n_jobs=3"]).hydra.launcher
        slurm = composer.compose(["launcher=slurm", "+experiment=main", "hydra.launcher.partition=gpu"])
    assert local._target_.endswith("BasicLauncher")
    assert joblib._target_.endswith("JoblibLauncher") and joblib.n_jobs == 3
    launcher = slurm.hydra.launcher
    assert launcher._target_.endswith("SlurmLauncher") and launcher.partition == "gpu"
    assert launcher.max_num_timeout > 0  # time-outs are requeued, the run resumes
    assert launcher.additional_parameters.requeue is True
    assert launcher.name == "rlinfluence-main"
    assert launcher.submitit_folder == "runs/main/.submitit/%j"


def test_sbatch_options_come_from_the_slurm_launcher_config():
    options = slurm.sbatch_options(
        overrides=[
            "hydra.launcher.partition=gpu",
            "hydra.launcher.account=proj",
            "hydra.launcher.timeout_min=90",
            "hydra.launcher.mem_gb=2",
        ]
    )
    for expected in ("--partition=gpu", "--account=proj", "--time=90", "--mem=2G", "--cpus-per-task=1", "--requeue"):
        assert expected in options
    # a task that trains a block of seeds gets a run's time for each of them
    assert "--time=900" in slurm.sbatch_options(overrides=["hydra.launcher.timeout_min=90"], seeds_per_task=10)


def test_submitting_seed_blocks_scales_the_time_and_counts_one_task(tmp_path, monkeypatch, fake_slurm, capsys):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "block.txt"
    seeds = [Path(f"runs/t/seed{seed}") for seed in range(10)]
    Manifest([Run(["engine=stacked", "seeds=[0,1,2,3,4,5,6,7,8,9]"], seeds)], {"workdir": str(tmp_path)}).write(path)
    assert slurm.main(["submit", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"{path}: 10 runs in 1 task: 0 done" in out
    assert "--time is launcher=slurm's timeout_min times 10, the seeds of its largest task" in out
    assert "--time=2400" in fake_slurm()[0]["args"]  # timeout_min=240 a run


# ----------------------------------------------------------------------------- skip-if-done and submission


@pytest.fixture
def fake_slurm(tmp_path, monkeypatch):
    """`sbatch` that records its arguments and prints job ids 100, 101, ...; `scontrol`
    that reports MaxArraySize=4; `squeue` that reports an empty queue."""
    bin_dir = tmp_path / "fakebin"
    bin_dir.mkdir()
    calls = tmp_path / "sbatch_calls.jsonl"
    (bin_dir / "sbatch").write_text(
        f"#!{sys.executable}\nimport json, os, sys\n"
        f"path = {str(calls)!r}\n"
        "n = sum(1 for _ in open(path)) if os.path.exists(path) else 0\n"
        "open(path, 'a').write(json.dumps({'args': sys.argv[1:], 'cmd': os.environ.get('RLINF_CMD')}) + '\\n')\n"
        "print(100 + n)\n"
    )
    (bin_dir / "scontrol").write_text("#!/bin/sh\necho 'MaxArraySize            = 4'\n")
    (bin_dir / "squeue").write_text("#!/bin/sh\nexit 0\n")
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")

    def read_calls():
        return [json.loads(line) for line in calls.read_text().splitlines()] if calls.exists() else []

    return read_calls


def _manifest_with_dirs(tmp_path: Path, n: int) -> Path:
    runs = [Run([f"seed={i}"], [Path(f"runs/t/seed{i}")]) for i in range(n)]
    path = tmp_path / "manifests" / "t.txt"
    Manifest(runs, {"commit": "unknown", "workdir": str(tmp_path), "runs": str(n)}).write(path)
    return path


def test_progress_skips_finished_runs(tmp_path):
    path = _manifest_with_dirs(tmp_path, 5)
    for i in (1, 3):
        (tmp_path / f"runs/t/seed{i}").mkdir(parents=True)
        (tmp_path / f"runs/t/seed{i}/DONE").touch()
    (tmp_path / "runs/t/seed4").mkdir(parents=True)  # started, not finished
    state = slurm.progress(path, Manifest.read(path), tmp_path)
    assert state.done == [1, 3]
    assert state.todo == [0, 2, 4]


def test_hand_written_lines_are_composed_to_find_their_run_dir(tmp_path):
    path = tmp_path / "hand.txt"
    path.write_text("# written by hand\nenv=frozenlake method=ppo seed=4\nenv=frozenlake method=ppo seed=5\n")
    run_dir = tmp_path / "runs/default/frozenlake/sgd/ppo/seed4"
    run_dir.mkdir(parents=True)
    (run_dir / "DONE").touch()
    state = slurm.progress(path, Manifest.read(path), tmp_path)
    assert state.run_dirs == [[Path(f"runs/default/frozenlake/sgd/ppo/seed{k}")] for k in (4, 5)]
    assert state.done == [0] and state.todo == [1]


def test_submit_splits_by_max_array_size_and_skips_done_runs(tmp_path, monkeypatch, fake_slurm, capsys):
    monkeypatch.chdir(tmp_path)
    path = _manifest_with_dirs(tmp_path, 10)
    for i in (0, 5):
        (tmp_path / f"runs/t/seed{i}").mkdir(parents=True)
        (tmp_path / f"runs/t/seed{i}/DONE").touch()

    assert slurm.main(["submit", str(path), "--parallel", "2", "--no-config", "--", "--time=5"]) == 0
    calls = fake_slurm()
    assert len(calls) == 3  # MaxArraySize=4: runs 0-3, 4-7, 8-9
    arrays = [next(a for a in c["args"] if a.startswith("--array=")) for c in calls]
    assert arrays == ["--array=1-3%2", "--array=0,2-3%2", "--array=0-1%2"]
    offsets = [next(a for a in c["args"] if a.startswith("--export=")) for c in calls]
    assert offsets == [f"--export=ALL,RLINF_MANIFEST_OFFSET={o}" for o in (0, 4, 8)]
    # chained, so that at most --parallel tasks run in total
    assert not any(a.startswith("--dependency") for a in calls[0]["args"])
    assert "--dependency=afterany:100" in calls[1]["args"] and "--dependency=afterany:101" in calls[2]["args"]
    for call in calls:
        assert call["args"][-2:] == [str(SCRIPT), str(path.resolve())]
        assert "--time=5" in call["args"] and f"--chdir={tmp_path}" in call["args"]
        assert call["cmd"] == f"{sys.executable} -m rlinfluence"
    out = capsys.readouterr().out
    assert "10 runs: 2 done, 0 queued or running, 8 to do" in out
    assert [line.split("\t")[0] for line in out.splitlines() if "\tarray" in line] == ["100", "101", "102"]

    # every run finished: resubmitting submits nothing
    for i in range(10):
        (tmp_path / f"runs/t/seed{i}").mkdir(parents=True, exist_ok=True)
        (tmp_path / f"runs/t/seed{i}/DONE").touch()
    assert slurm.main(["submit", str(path), "--no-config"]) == 0
    assert len(fake_slurm()) == 3
    assert "10 done, 0 queued or running, 0 to do" in capsys.readouterr().out


def test_submit_leaves_queued_runs_alone(tmp_path, monkeypatch, fake_slurm):
    monkeypatch.chdir(tmp_path)
    path = _manifest_with_dirs(tmp_path, 3)
    comment = slurm.job_comment(path, 0)
    squeue = tmp_path / "fakebin" / "squeue"
    squeue.write_text(f"#!/bin/sh\necho '7_1|RUNNING|{comment}'\necho '9_0|PENDING|someone else'\n")
    state = slurm.progress(path, Manifest.read(path), tmp_path)
    assert state.queued == {1: "RUNNING"} and state.todo == [0, 2]
    assert slurm.main(["submit", str(path), "--no-config"]) == 0
    assert [a for a in fake_slurm()[0]["args"] if a.startswith("--array=")] == ["--array=0,2%64"]


def test_dry_run_prints_the_commands(tmp_path, monkeypatch, fake_slurm, capsys):
    monkeypatch.chdir(tmp_path)
    path = _manifest_with_dirs(tmp_path, 2)
    assert slurm.main(["submit", str(path), "--dry-run", "--no-config"]) == 0
    assert fake_slurm() == []
    commands = [shlex.split(line) for line in capsys.readouterr().out.splitlines() if line.startswith("sbatch ")]
    assert len(commands) == 1 and "--array=0-1%64" in commands[0]


# ----------------------------------------------------------------------------- engine=stacked seed blocks


def test_a_stacked_seed_sweep_is_a_line_per_block_of_seeds(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "blocks.txt"
    sweep = ["-m", "+experiment=main", "env=frozenlake", "method=iif,ppo", "engine=stacked", "seed=range(5)"]
    assert slurm.main(["make", *sweep, "--seeds-per-task", "2", "-o", str(out)]) == 0
    assert f"{out}: 10 runs in 6 tasks" in capsys.readouterr().out
    manifest = Manifest.read(out)
    assert manifest.header["runs"] == "10" and manifest.header["tasks"] == "6"
    assert "--seeds-per-task 2" in manifest.header["command"]
    # the overlay's own seed sweep (range(0,5)) does not run each block again: a line per config and block, a
    # command of its own (no seed= beside its seeds=, which a single command refuses)
    blocks = [[o for o in run.overrides if o.startswith("seed")] for run in manifest.runs]
    assert blocks == [[f"seeds={block}"] for block in ("[0,1]", "[2,3]", "[4]") for _method in (1, 2)]
    with mf.Composer() as composer:  # each line records its seeds' run dirs, the ones their own commands train
        for run in manifest.runs:
            seeds = json.loads(next(o for o in run.overrides if o.startswith("seeds="))[len("seeds=") :])
            method = next(o for o in run.overrides if o.startswith("method="))
            alone = ["+experiment=main", "env=frozenlake", method, "engine=stacked"]
            assert run.run_dirs == [d for s in seeds for d in composer.run_dirs([*alone, f"seed={s}"])]
    # without --seeds-per-task, a config's seeds are one line, as `rlinfluence -m` packs them
    assert slurm.main(["make", *sweep, "-o", str(tmp_path / "one.txt")]) == 0
    one = Manifest.read(tmp_path / "one.txt").runs
    assert [[o for o in run.overrides if o.startswith("seed")] for run in one] == [["seeds=[0,1,2,3,4]"]] * 2
    # engine=stacked beside the overlay's seed sweep alone packs that sweep too
    assert slurm.main(["make", *sweep[:-1], "-o", str(tmp_path / "overlay.txt")]) == 0
    assert [run.overrides for run in Manifest.read(tmp_path / "overlay.txt").runs] == [run.overrides for run in one]


def test_seeds_per_task_without_a_stacked_seed_sweep_is_refused(tmp_path, capsys):
    out = tmp_path / "m.txt"
    for overrides in (["seed=0,1"], ["engine=stacked", "seed=0,1", "--seeds-per-task", "0"]):
        extra = [] if "--seeds-per-task" in overrides else ["--seeds-per-task", "2"]
        assert slurm.main(["make", *overrides, *extra, "-o", str(out)]) == 2
        [line] = capsys.readouterr().err.strip().splitlines()
        assert "--seeds-per-task=" in line and "packs a seed sweep of engine=stacked" in line
    assert not out.exists()


def test_status_counts_each_seed_and_a_block_is_done_when_all_its_seeds_are(tmp_path, capsys):
    blocks = [
        Run(["engine=stacked", f"seeds=[{a},{a + 1}]"], [Path(f"runs/t/seed{a}"), Path(f"runs/t/seed{a + 1}")])
        for a in (0, 2)
    ]
    path = tmp_path / "blocks.txt"
    Manifest(blocks, {"commit": "unknown", "workdir": str(tmp_path), "runs": "4", "tasks": "2"}).write(path)
    for seed in (0, 1, 2):
        (tmp_path / f"runs/t/seed{seed}").mkdir(parents=True)
        (tmp_path / f"runs/t/seed{seed}/DONE").touch()
    state = slurm.progress(path, Manifest.read(path), tmp_path)
    assert state.done == [0] and state.todo == [1]  # seed 3 is not done: its block is still to run
    assert slurm.main(["status", str(path), "--list"]) == 0
    out = capsys.readouterr().out
    assert "4 runs in 2 tasks: 3 done, 0 queued or running, 1 to do" in out
    assert "1\tto do\tengine=stacked 'seeds=[2,3]'\truns/t/seed2 runs/t/seed3" in out


def test_an_analysis_seed_sweep_on_the_stacked_engine_stays_a_job_per_seed():
    """An analysis looks into one seed's run, so `-m task=intervene engine=stacked seed=0,1` is not packed into
    seeds=[0,1] (which an analysis refuses); training's is."""
    assert pack_seed_sweep(["task=intervene", "engine=stacked", "seed=0,1"]) == {}
    assert pack_seed_sweep(["task=train", "engine=stacked", "seed=0,1"]) == {"seed=0,1": ["seeds=[0,1]", "seed=0"]}
