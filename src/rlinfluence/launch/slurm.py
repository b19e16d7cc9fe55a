"""SLURM for manifests (launch/manifest.py): sbatch a manifest's runs as arrays, find the queued ones with
squeue, count progress, and the ``rlinfluence-manifest`` command line."""

from __future__ import annotations

import argparse
import getpass
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from hydra.errors import HydraException

from rlinfluence.choices import ConfigError, require
from rlinfluence.config.compose import one_line
from rlinfluence.launch import manifest as manifest_files
from rlinfluence.launch.manifest import (
    CONFIG_NAME,
    DEFAULT_CONFIG_DIR,
    DEFAULT_SCRIPT,
    ArrayChunk,
    Composer,
    Manifest,
    make_manifest,
    resolve_run_dirs,
    split_into_arrays,
)
from rlinfluence.run.provenance import describe_code_version
from rlinfluence.run.rundir import is_done

SLURM_DEFAULT_MAX_ARRAY_SIZE = 1001
REFUSED = 2  # the exit code of a command refused as given, as the CLI's
# hydra.launcher._target_ of launcher=slurm (conf/launcher/slurm.yaml)
SUBMITIT_SLURM = "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"

# ----------------------------------------------------------------------------- SLURM


def require_commands(what: str, commands: Sequence[str], otherwise: str) -> None:
    """`what` runs SLURM's `commands`: refused in one line naming those not on PATH, before it starts."""
    missing = [command for command in commands if shutil.which(command) is None]
    require(not missing, f"{what} needs SLURM's {' and '.join(missing)} on PATH, not found here; {otherwise}")


def check_launcher(cfg: Any) -> None:
    """A sweep's launcher can run here: launcher=slurm submits the array with sbatch and starts each job with
    srun (submitit), so a machine without them is told so before the first job, not by a traceback after."""
    from omegaconf import OmegaConf

    if OmegaConf.select(cfg, "hydra.launcher._target_") == SUBMITIT_SLURM:
        require_commands("launcher=slurm", ("sbatch", "srun"), "without SLURM, use launcher=local or launcher=joblib")


def max_array_size() -> int:
    """MaxArraySize of the cluster (``scontrol show config``)."""
    out = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, check=True).stdout
    match = re.search(r"^MaxArraySize\s*=\s*(\d+)", out, re.MULTILINE)
    return int(match.group(1)) if match else SLURM_DEFAULT_MAX_ARRAY_SIZE


def job_comment(manifest_path: Path, offset: int) -> str:
    """Marks our arrays (--comment), so that queued runs can be found with squeue."""
    return f"rlinfluence-manifest {Path(manifest_path).resolve()} offset={offset}"


def queued_runs(manifest_path: Path) -> dict[int, str]:
    """Runs of this manifest that are pending or running: run number -> SLURM state."""
    if shutil.which("squeue") is None:
        return {}
    out = subprocess.run(
        ["squeue", "--noheader", "--array", "--user", getpass.getuser(), "--format=%i|%T|%k"],
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        print(f"warning: squeue failed, queued runs unknown: {out.stderr.strip()}", file=sys.stderr)
        return {}
    ours = re.escape(job_comment(manifest_path, 0)).replace("offset=0", r"offset=(\d+)")
    queued: dict[int, str] = {}
    for row in out.stdout.splitlines():
        job, state, comment = (row.split("|", 2) + ["", ""])[:3]
        mark, task = re.fullmatch(ours, comment.strip()), re.fullmatch(r"\d+_(\d+)", job.strip())
        if mark and task:
            queued[int(mark.group(1)) + int(task.group(1))] = state
    return queued


def sbatch_options(
    config_dir: Path = DEFAULT_CONFIG_DIR,
    config_name: str = CONFIG_NAME,
    overrides: Sequence[str] = (),
    seeds_per_task: int = 1,
) -> list[str]:
    """sbatch options from ``launcher=slurm``'s config (partition, account, time, memory...),
    so that both SLURM paths share one set of site settings. `timeout_min` is a run's time: a task that trains
    a block of `seeds_per_task` seeds gets that many times it, what its seeds would take one after another (a
    stacked block takes less, by how much depends on the env; a task that runs out is requeued and resumes)."""
    from omegaconf import OmegaConf

    with Composer(config_dir, config_name) as composer:
        cfg = composer.compose(["launcher=slurm", *overrides])
    launcher = cast(dict[str, Any], OmegaConf.to_container(cfg.hydra.launcher, resolve=True))
    flags = {
        "partition": "partition",
        "account": "account",
        "qos": "qos",
        "constraint": "constraint",
        "exclude": "exclude",
        "gres": "gres",
        "cpus_per_task": "cpus-per-task",
        "gpus_per_node": "gpus-per-node",
        "mem_per_cpu": "mem-per-cpu",
    }
    options = [f"--{flag}={launcher[key]}" for key, flag in flags.items() if launcher.get(key) is not None]
    if launcher.get("timeout_min") is not None:
        options.append(f"--time={launcher['timeout_min'] * seeds_per_task}")
    if launcher.get("mem_gb") is not None:
        options.append(f"--mem={launcher['mem_gb']}G")
    for key, value in (launcher.get("additional_parameters") or {}).items():
        flag = key.replace("_", "-")
        options.append(f"--{flag}" if value is True else f"--{flag}={value}")
    return options


@dataclass
class Progress:
    """The manifest's lines (array tasks) done, queued or running, and to do; each line's run dirs (a seed
    block's, one per seed) and how many of them are finished."""

    done: list[int]
    queued: dict[int, str]
    todo: list[int]
    run_dirs: list[list[Path]]
    finished: list[int]

    @property
    def runs(self) -> int:
        return sum(len(dirs) for dirs in self.run_dirs)

    def runs_of(self, lines: Iterable[int]) -> int:
        """How many runs of `lines` are not finished (a line's finished seeds are skipped when it runs)."""
        return sum(len(self.run_dirs[i]) - self.finished[i] for i in lines)


def progress(manifest_path: Path, manifest: Manifest, workdir: Path, config_dir: Path = DEFAULT_CONFIG_DIR) -> Progress:
    """Which lines are finished (every run of the line: a seed block is done when all its seeds are),
    queued/running, or still to do. Lines without recorded run dirs (written by hand) are composed to find
    them."""
    missing = [i for i, run in enumerate(manifest.runs) if not run.run_dirs]
    composed = (
        dict(zip(missing, resolve_run_dirs([manifest.runs[i].overrides for i in missing], config_dir)))
        if missing
        else {}
    )
    dirs = [composed[i] if not run.run_dirs else run.run_dirs for i, run in enumerate(manifest.runs)]
    finished = [sum(is_done(workdir / d) for d in line) for line in dirs]
    done = [i for i, line in enumerate(dirs) if finished[i] == len(line)]
    queued = {i: state for i, state in queued_runs(manifest_path).items() if i < len(dirs) and i not in done}
    todo = [i for i in range(len(dirs)) if i not in done and i not in queued]
    return Progress(done, queued, todo, dirs, finished)


def submit(
    manifest_path: Path,
    runs: Sequence[int],
    parallel: int,
    workdir: Path,
    script: Path = DEFAULT_SCRIPT,
    max_size: int | None = None,
    chain: bool = True,
    log_dir: Path | None = None,
    options: Sequence[str] = (),
    command: str | None = None,
    dry_run: bool = False,
) -> list[tuple[str, ArrayChunk]]:
    """sbatch ``runs`` (run numbers of the manifest) as arrays; returns (job id, chunk).

    ``parallel`` caps the running tasks of an array (``%K``). With ``chain`` a split
    manifest's arrays run one after the other (``--dependency=afterany``), so at most
    ``parallel`` runs are active in total.
    """
    manifest_path = Path(manifest_path).resolve()
    max_size = max_size or max_array_size()
    log_dir = Path(log_dir or manifest_path.parent / "logs" / manifest_path.stem).resolve()
    if not dry_run:
        log_dir.mkdir(parents=True, exist_ok=True)  # SLURM does not create it
    env = dict(os.environ, RLINF_CMD=command or f"{sys.executable} -m rlinfluence")

    submitted: list[tuple[str, ArrayChunk]] = []
    for chunk in split_into_arrays(runs, max_size):
        cmd = [
            "sbatch",
            "--parsable",
            f"--array={chunk.spec}%{max(1, parallel)}",
            f"--job-name=rlinfluence-{manifest_path.stem}",
            f"--comment={job_comment(manifest_path, chunk.offset)}",
            f"--output={log_dir}/%A_%a.out",
            f"--chdir={workdir}",
            f"--export=ALL,RLINF_MANIFEST_OFFSET={chunk.offset}",
        ]
        if chain and submitted:
            cmd.append(f"--dependency=afterany:{submitted[-1][0]}")
        cmd += [*options, str(Path(script).resolve()), str(manifest_path)]
        if dry_run:
            print(shlex.join(cmd))
            job = f"<job {len(submitted)}>"
        else:
            out = subprocess.run(cmd, capture_output=True, text=True, env=env)
            if out.returncode != 0:
                raise RuntimeError(f"sbatch failed: {out.stderr.strip()}\n  {shlex.join(cmd)}")
            job = out.stdout.strip().split(";")[0]
        submitted.append((job, chunk))
    return submitted


# ----------------------------------------------------------------------------- command line


def _workdir(args: argparse.Namespace, manifest: Manifest) -> Path:
    return Path(args.workdir or manifest.workdir or os.getcwd()).resolve()


def in_tasks(count: int) -> str:
    return f" in {count} task{'' if count == 1 else 's'}"


def _summary(path: Path, manifest: Manifest, state: Progress) -> str:
    """The runs done, queued or running, and to do; with seed blocks, counted seed by seed, and the tasks."""
    tasks = "" if state.runs == len(manifest.runs) else in_tasks(len(manifest.runs))
    return (
        f"{path}: {state.runs} runs{tasks}: {sum(state.finished)} done, {state.runs_of(state.queued)} queued or "
        f"running, {state.runs_of(state.todo)} to do"
    )


def _read(path: Path) -> Manifest:
    try:
        return Manifest.read(path)
    except OSError as error:
        raise ConfigError(
            f"{path}: no manifest to read ({error.strerror}); `rlinfluence-manifest make <overrides> -o {path}` "
            "writes one"
        ) from None


def _cmd_make(args: argparse.Namespace) -> int:
    command = shlex.join(["rlinfluence-manifest", "make", *args.overrides, "-o", str(args.output)])
    if args.seeds_per_task is not None:
        command += f" --seeds-per-task {args.seeds_per_task}"
    try:
        manifest = make_manifest(args.overrides, args.config_dir, command=command, seeds_per_task=args.seeds_per_task)
    except ValueError as error:  # a sweep no manifest can list (expand_sweep): an interval, Hydra's own keys
        raise ConfigError(str(error)) from None
    if args.output.exists() and not args.force:
        old = _read(args.output)
        require(
            [r.overrides for r in old.runs] == [r.overrides for r in manifest.runs],
            f"{args.output} exists and lists other runs; --force replaces it",
        )
    manifest.write(args.output)
    tasks = in_tasks(int(manifest.header["tasks"])) if "tasks" in manifest.header else ""
    print(f"{args.output}: {manifest.header['runs']} runs{tasks} (commit {manifest.header['commit']})")
    return 0


def _cmd_submit(args: argparse.Namespace) -> int:
    manifest = _read(args.manifest)
    require(
        args.script.is_file(),
        f"--script={args.script} is not a file (the default is a checkout's sbatch/run_array.sbatch; a pip install "
        "has none)",
    )
    require_commands(
        "submit",
        [*(() if args.dry_run else ("sbatch",)), *(() if args.max_array_size else ("scontrol",))],
        "--dry-run --max-array-size N prints the sbatch commands without them",
    )
    workdir = _workdir(args, manifest)
    state = progress(args.manifest, manifest, workdir, args.config_dir)
    print(_summary(args.manifest, manifest, state))
    if not state.todo:
        return 0
    checkout = describe_code_version().split()[0]
    if manifest.commit and manifest.commit != checkout:
        print(
            f"warning: the manifest was made at commit {manifest.commit}, the checkout is at {checkout}",
            file=sys.stderr,
        )
    seeds_per_task = max(len(run.run_dirs) for run in manifest.runs) if manifest.runs else 1
    options = [] if args.no_config else sbatch_options(args.config_dir, seeds_per_task=max(seeds_per_task, 1))
    if seeds_per_task > 1 and not args.no_config:
        print(
            f"{args.manifest}: --time is launcher=slurm's timeout_min times {seeds_per_task}, the seeds of its "
            "largest task (options after -- win, e.g. -- --time=600)"
        )
    jobs = submit(
        args.manifest,
        state.todo,
        args.parallel,
        workdir,
        script=args.script,
        max_size=args.max_array_size,
        chain=not args.no_chain,
        log_dir=args.log_dir,
        options=[*options, *args.sbatch_options],
        dry_run=args.dry_run,
    )
    for job, chunk in jobs:
        print(f"{job}\tarray {chunk.spec} (runs {chunk.offset} + index, {len(chunk.indices)} tasks)")
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    manifest = _read(args.manifest)
    state = progress(args.manifest, manifest, _workdir(args, manifest), args.config_dir)
    print(_summary(args.manifest, manifest, state) + f" (commit {manifest.header.get('commit', '?')})")
    if args.list:
        done = set(state.done)
        for i, run in enumerate(manifest.runs):
            mark = "done" if i in done else state.queued.get(i, "to do").lower()
            print(f"{i}\t{mark}\t{shlex.join(run.overrides)}\t{shlex.join(map(str, state.run_dirs[i]))}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rlinfluence-manifest",
        description=manifest_files.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--config-dir", type=Path, default=DEFAULT_CONFIG_DIR, help="Hydra config dir [%(default)s]")
    commands = parser.add_subparsers(dest="command", required=True)

    make = commands.add_parser("make", help="expand a sweep into a manifest")
    make.add_argument("overrides", nargs="*", help="as for `rlinfluence -m`, e.g. +experiment=main seed=0,1")
    make.add_argument("-m", "--multirun", action="store_true", help="implied: the sweep is expanded as -m expands it")
    make.add_argument(
        "--seeds-per-task",
        type=int,
        help="engine=stacked seed='range(20)': a task per block of this many seeds [all of a config's seeds]",
    )
    make.add_argument("-o", "--output", type=Path, required=True)
    make.add_argument("--force", action="store_true", help="replace an existing manifest that lists other runs")
    make.set_defaults(func=_cmd_make)

    sub = commands.add_parser(
        "submit",
        help="sbatch the runs that are not done or queued",
        usage="%(prog)s manifest [options] [-- sbatch options]",
    )
    sub.add_argument("manifest", type=Path)
    sub.add_argument("-p", "--parallel", type=int, default=64, help="tasks running at once (%%K) [%(default)s]")
    sub.add_argument("--workdir", type=Path, help="where the runs live and the jobs run [the manifest's workdir]")
    sub.add_argument("--script", type=Path, default=DEFAULT_SCRIPT, help="array script [%(default)s]")
    sub.add_argument("--max-array-size", type=int, help="split arrays at this size [MaxArraySize of the cluster]")
    sub.add_argument("--no-chain", action="store_true", help="let split arrays run side by side (K each)")
    sub.add_argument("--no-config", action="store_true", help="do not take sbatch options from launcher=slurm's config")
    sub.add_argument("--log-dir", type=Path, help="job output [<manifest dir>/logs/<manifest name>]")
    sub.add_argument("--dry-run", action="store_true", help="print the sbatch commands instead")
    sub.set_defaults(func=_cmd_submit)

    status = commands.add_parser("status", help="count done, queued and remaining runs")
    status.add_argument("manifest", type=Path)
    status.add_argument("--workdir", type=Path, help="where the runs live [the manifest's workdir]")
    status.add_argument("--list", action="store_true", help="one line per task (a seed block's: its run dirs)")
    status.set_defaults(func=_cmd_status)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """A command that cannot run as given (a missing manifest, a bad override, no SLURM to submit to) is one
    line and exit code 2, as the CLI's."""
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:  # `submit m.txt -p 8 -- --time=60 --partition=gpu`: the rest is for sbatch
        extra, argv = argv[argv.index("--") + 1 :], argv[: argv.index("--")]
    args = build_parser().parse_args(argv)
    if extra and args.command != "submit":
        build_parser().error("options after -- are for `submit` (sbatch options)")
    args.sbatch_options = extra
    try:
        return args.func(args)
    except ConfigError as error:
        message = str(error)
    except HydraException as error:
        message = f"config error: {one_line(error)}"
    print(f"rlinfluence-manifest: {message}", file=sys.stderr)
    return REFUSED
