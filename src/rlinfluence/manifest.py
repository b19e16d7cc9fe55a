"""Sweep manifests: one run per line, for ``sbatch --array`` with sbatch/run_array.sbatch.

A manifest lists the runs of a sweep, one line of Hydra overrides (shell words) each,
with the run directory as a trailing comment, after a header that records where it
came from::

    # rlinfluence manifest: one run per line (Hydra overrides, shell words)
    # commit: 3f2c9e1d... (uncommitted changes)
    # created: 2025-06-01T12:00:00+00:00
    # command: rlinfluence-manifest make +experiment=main -o manifests/main.txt
    # workdir: /home/me/rlinfluence
    # runs: 90
    +experiment=main env=frozenlake method=iif seed=0  # runs/main/frozenlake/sgd/iif-p50/seed0
    ...

Commands (``rlinfluence-manifest ...`` or ``python -m rlinfluence.manifest ...``)::

    make +experiment=main [overrides...] -o manifests/main.txt
        Expand the sweep exactly as ``rlinfluence -m`` would (the overlay's
        ``hydra.sweeper.params`` together with sweeps on the command line: cartesian
        product, Hydra's override grammar), one line per run.
    submit manifests/main.txt [--parallel K] [--dry-run] [-- sbatch options]
        sbatch the runs that are neither finished (``DONE`` in the run dir) nor queued,
        as arrays of at most MaxArraySize tasks, and print the job ids. Partition,
        account, time and memory come from ``launcher=slurm``'s config (including the
        site file conf/local/launcher/slurm.yaml); options after ``--`` win.
    status manifests/main.txt [--list]
        Count finished, queued or running, and remaining runs.

Run directories are relative to the ``workdir`` (where ``make`` ran, normally the
repository root); the jobs run there as well.
"""

from __future__ import annotations

import argparse
import getpass
import multiprocessing
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from rlinfluence.paths import CONFIG_DIR, REPO_ROOT
from rlinfluence.provenance import describe_code_version
from rlinfluence.rundir import is_done

DEFAULT_CONFIG_DIR = Path(CONFIG_DIR)
DEFAULT_SCRIPT = REPO_ROOT / "sbatch" / "run_array.sbatch"
CONFIG_NAME = "config"
TITLE = "rlinfluence manifest: one run per line (Hydra overrides, shell words)"
SLURM_DEFAULT_MAX_ARRAY_SIZE = 1001

# ----------------------------------------------------------------------------- sweep expansion


def expand_sweep(params: Mapping[str, object] | None, overrides: Sequence[str]) -> list[list[str]]:
    """The runs of ``rlinfluence -m <overrides>``, each a list of override strings.

    ``params`` is the overlay's ``hydra.sweeper.params`` (key -> "a,b,c"). As in Hydra's
    basic sweeper, a command-line override replaces the sweep of the same key, every
    key contributes its list of values (a plain override: one), and the runs are the
    cartesian product. Keys given only on the command line come first in each line
    ("what you asked for, then what the sweep varies"); the values do not depend on it.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    swept = parser.parse_overrides([f"{key}={value}" for key, value in (params or {}).items()])
    given = parser.parse_overrides([o for o in overrides if o not in ("-m", "--multirun")])

    final = {ov.get_key_element(): ov for ov in [*swept, *given]}  # the command line wins
    swept_keys = [ov.get_key_element() for ov in swept]
    order = [ov.get_key_element() for ov in given if ov.get_key_element() not in swept_keys]
    order = list(dict.fromkeys(order + swept_keys))

    runs: list[list[str]] = [[]]
    for key in order:
        ov = final[key]
        if not ov.is_sweep_override():
            values = [ov.input_line]
        elif ov.is_hydra_override():
            raise ValueError(f"sweeping over Hydra's own configuration is not supported: {ov.input_line!r}")
        elif not ov.is_discrete_sweep():
            raise ValueError(f"cannot enumerate {ov.input_line!r}: only choice and range sweeps are")
        else:
            values = [f"{key}={value}" for value in ov.sweep_string_iterator()]
        runs = [run + [value] for run in runs for value in values]
    return runs


# ----------------------------------------------------------------------------- manifest files


@dataclass
class Run:
    overrides: list[str]
    run_dir: Path | None = None  # relative to the manifest's workdir, unless absolute

    def line(self) -> str:
        text = shlex.join(self.overrides)
        return f"{text}  # {self.run_dir}" if self.run_dir is not None else text

    @classmethod
    def parse(cls, line: str) -> "Run":
        overrides = shlex.split(line, comments=True)
        # The comment starts at the first '#' (after a blank) outside quotes: the first
        # cut whose left part parses to the same words.
        for match in re.finditer(r"\s#", line):
            try:
                if shlex.split(line[: match.start()]) == overrides:
                    comment = line[match.end():].strip()
                    return cls(overrides, Path(comment) if comment else None)
            except ValueError:  # the cut is inside quotes
                continue
        return cls(overrides)


@dataclass
class Manifest:
    runs: list[Run]
    header: dict[str, str] = field(default_factory=dict)

    @property
    def commit(self) -> str | None:
        value = self.header.get("commit", "")
        return value.split()[0] if re.match(r"[0-9a-f]{7,40}\b", value) else None

    @property
    def workdir(self) -> Path | None:
        return Path(self.header["workdir"]) if self.header.get("workdir") else None

    def dump(self) -> str:
        lines = [f"# {TITLE}"] + [f"# {key}: {value}" for key, value in self.header.items()]
        return "\n".join(lines + [run.line() for run in self.runs]) + "\n"

    def write(self, path: Path) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(self.dump())
        tmp.replace(path)

    @classmethod
    def parse(cls, text: str) -> "Manifest":
        """``# key: value`` comments before the first run form the header; other comments
        and blank lines are skipped; every other line is a run, counted from 0 (the same
        rule as sbatch/run_array.sbatch)."""
        header: dict[str, str] = {}
        runs: list[Run] = []
        for raw in text.splitlines():
            line = raw.strip()
            if line.startswith("#"):
                entry = re.match(r"#\s*([\w-]+):\s*(.*)$", line)
                if entry and not runs:
                    header[entry.group(1)] = entry.group(2)
            elif line:
                runs.append(Run.parse(line))
        return cls(runs, header)

    @classmethod
    def read(cls, path: Path) -> "Manifest":
        return cls.parse(Path(path).read_text())


# ----------------------------------------------------------------------------- composing configs


class Composer:
    """Composes configs from conf/ the way ``rlinfluence`` does (use as a context manager)."""

    def __init__(self, config_dir: Path = DEFAULT_CONFIG_DIR, config_name: str = CONFIG_NAME):
        self.config_dir = Path(config_dir).resolve()
        self.config_name = config_name
        self._context = None

    def __enter__(self) -> "Composer":
        from hydra import initialize_config_dir

        self._context = initialize_config_dir(config_dir=str(self.config_dir), version_base="1.3")
        self._context.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._context.__exit__(*exc)

    def compose(self, overrides: Sequence[str], multirun: bool = False):
        """The full config (``hydra`` node included); HydraConfig is set to it for runs."""
        from hydra.core.global_hydra import GlobalHydra
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        cfg = GlobalHydra.instance().hydra.compose_config(
            config_name=self.config_name,
            overrides=list(overrides),
            run_mode=RunMode.MULTIRUN if multirun else RunMode.RUN,
            with_log_configuration=False,
        )
        if not multirun:
            HydraConfig.instance().set_config(cfg)
        return cfg

    def sweep_params(self, overrides: Sequence[str]) -> dict[str, object]:
        """``hydra.sweeper.params`` as ``rlinfluence -m <overrides>`` sees it."""
        from omegaconf import OmegaConf

        params = OmegaConf.select(self.compose(overrides, multirun=True), "hydra.sweeper.params")
        return dict(OmegaConf.to_container(params)) if params is not None else {}

    def run_dir(self, overrides: Sequence[str]) -> Path:
        from rlinfluence.rundir import run_dir

        return Path(run_dir(self.compose(overrides)))


def _run_dirs_serial(config_dir: Path, config_name: str, runs: Sequence[Sequence[str]]) -> list[Path]:
    with Composer(config_dir, config_name) as composer:
        return [composer.run_dir(run) for run in runs]


def resolve_run_dirs(runs: Sequence[Sequence[str]], config_dir: Path = DEFAULT_CONFIG_DIR,
                     config_name: str = CONFIG_NAME, jobs: int | None = None) -> list[Path]:
    """Compose every run (which also checks it) and return its run dir. Hydra needs
    ~0.1 s per composition, so large sweeps are spread over worker processes."""
    jobs = jobs or min(os.cpu_count() or 1, 8)
    if jobs <= 1 or len(runs) < 64:
        return _run_dirs_serial(config_dir, config_name, runs)
    size = -(-len(runs) // jobs)
    chunks = [runs[i:i + size] for i in range(0, len(runs), size)]
    with multiprocessing.get_context("fork").Pool(len(chunks)) as pool:
        parts = pool.starmap(_run_dirs_serial, [(config_dir, config_name, chunk) for chunk in chunks])
    return [d for part in parts for d in part]


def make_manifest(overrides: Sequence[str], config_dir: Path = DEFAULT_CONFIG_DIR,
                  config_name: str = CONFIG_NAME, command: str | None = None) -> Manifest:
    """The manifest of ``rlinfluence -m <overrides>``. Runs that share a run dir are one
    run to ``rlinfluence`` (it resumes or skips by run dir): only the first is kept."""
    overrides = [o for o in overrides if o not in ("-m", "--multirun")]
    with Composer(config_dir, config_name) as composer:
        params = composer.sweep_params(overrides)
    expanded = expand_sweep(params, overrides)
    dirs = resolve_run_dirs(expanded, config_dir, config_name)

    runs: list[Run] = []
    first: dict[Path, Run] = {}
    for overrides_, run_dir in zip(expanded, dirs):
        if run_dir in first:
            print(f"warning: dropped {shlex.join(overrides_)!r}: same run dir ({run_dir}) as "
                  f"{shlex.join(first[run_dir].overrides)!r}", file=sys.stderr)
            continue
        first[run_dir] = Run(overrides_, run_dir)
        runs.append(first[run_dir])

    header = {
        "commit": describe_code_version(),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": command or shlex.join(["rlinfluence-manifest", "make", *overrides]),
        "workdir": os.getcwd(),
        "runs": str(len(runs)),
    }
    return Manifest(runs, header)


# ----------------------------------------------------------------------------- arrays


def compress_ranges(indices: Iterable[int]) -> str:
    """[0, 1, 2, 5, 7, 8] -> "0-2,5,7-8" (the ``sbatch --array`` syntax)."""
    values = sorted(set(indices))
    parts: list[str] = []
    start = 0
    for i in range(1, len(values) + 1):
        if i == len(values) or values[i] != values[i - 1] + 1:
            low, high = values[start], values[i - 1]
            parts.append(str(low) if low == high else f"{low}-{high}")
            start = i
    return ",".join(parts)


@dataclass(frozen=True)
class ArrayChunk:
    """One ``sbatch --array``: manifest run = ``offset`` + array index."""

    offset: int
    indices: tuple[int, ...]

    @property
    def spec(self) -> str:
        return compress_ranges(self.indices)

    @property
    def runs(self) -> list[int]:
        return [self.offset + i for i in self.indices]


def split_into_arrays(runs: Iterable[int], max_array_size: int) -> list[ArrayChunk]:
    """Group run numbers into arrays whose indices stay below MaxArraySize (SLURM bounds
    the largest index, not just the count): run r goes to the array with offset
    ``r - r % max_array_size``."""
    if max_array_size < 1:
        raise ValueError(f"max_array_size must be >= 1, not {max_array_size}")
    chunks: dict[int, list[int]] = {}
    for run in sorted(set(runs)):
        offset = run - run % max_array_size
        chunks.setdefault(offset, []).append(run - offset)
    return [ArrayChunk(offset, tuple(indices)) for offset, indices in sorted(chunks.items())]


# ----------------------------------------------------------------------------- SLURM


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
    out = subprocess.run(["squeue", "--noheader", "--array", "--user", getpass.getuser(), "--format=%i|%T|%k"],
                         capture_output=True, text=True)
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


def sbatch_options(config_dir: Path = DEFAULT_CONFIG_DIR, config_name: str = CONFIG_NAME,
                   overrides: Sequence[str] = ()) -> list[str]:
    """sbatch options from ``launcher=slurm``'s config (partition, account, time, memory...),
    so that both SLURM paths share one set of site settings."""
    from omegaconf import OmegaConf

    with Composer(config_dir, config_name) as composer:
        cfg = composer.compose(["launcher=slurm", *overrides])
    launcher = OmegaConf.to_container(cfg.hydra.launcher, resolve=True)
    flags = {"partition": "partition", "account": "account", "qos": "qos", "constraint": "constraint",
             "exclude": "exclude", "gres": "gres", "cpus_per_task": "cpus-per-task",
             "gpus_per_node": "gpus-per-node", "mem_per_cpu": "mem-per-cpu"}
    options = [f"--{flag}={launcher[key]}" for key, flag in flags.items() if launcher.get(key) is not None]
    if launcher.get("timeout_min") is not None:
        options.append(f"--time={launcher['timeout_min']}")
    if launcher.get("mem_gb") is not None:
        options.append(f"--mem={launcher['mem_gb']}G")
    for key, value in (launcher.get("additional_parameters") or {}).items():
        flag = key.replace("_", "-")
        options.append(f"--{flag}" if value is True else f"--{flag}={value}")
    return options


@dataclass
class Progress:
    done: list[int]
    queued: dict[int, str]
    todo: list[int]
    run_dirs: list[Path]


def progress(manifest_path: Path, manifest: Manifest, workdir: Path,
             config_dir: Path = DEFAULT_CONFIG_DIR) -> Progress:
    """Which runs are finished, queued/running, or still to do. Lines without a recorded
    run dir (written by hand) are composed to find it."""
    missing = [i for i, run in enumerate(manifest.runs) if run.run_dir is None]
    dirs = [run.run_dir for run in manifest.runs]
    if missing:
        for i, d in zip(missing, resolve_run_dirs([manifest.runs[i].overrides for i in missing], config_dir)):
            dirs[i] = d
    done = [i for i, d in enumerate(dirs) if is_done(workdir / d)]
    queued = {i: state for i, state in queued_runs(manifest_path).items() if i < len(dirs) and i not in done}
    todo = [i for i in range(len(dirs)) if i not in done and i not in queued]
    return Progress(done, queued, todo, dirs)


def submit(manifest_path: Path, runs: Sequence[int], parallel: int, workdir: Path,
           script: Path = DEFAULT_SCRIPT, max_size: int | None = None, chain: bool = True,
           log_dir: Path | None = None, options: Sequence[str] = (), command: str | None = None,
           dry_run: bool = False) -> list[tuple[str, ArrayChunk]]:
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
        cmd = ["sbatch", "--parsable", f"--array={chunk.spec}%{max(1, parallel)}",
               f"--job-name=rlinfluence-{manifest_path.stem}",
               f"--comment={job_comment(manifest_path, chunk.offset)}",
               f"--output={log_dir}/%A_%a.out", f"--chdir={workdir}",
               f"--export=ALL,RLINF_MANIFEST_OFFSET={chunk.offset}"]
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


def _summary(path: Path, manifest: Manifest, state: Progress) -> str:
    return (f"{path}: {len(manifest.runs)} runs: {len(state.done)} done, {len(state.queued)} queued or running, "
            f"{len(state.todo)} to do")


def _cmd_make(args: argparse.Namespace) -> int:
    command = shlex.join(["rlinfluence-manifest", "make", *args.overrides, "-o", str(args.output)])
    manifest = make_manifest(args.overrides, args.config_dir, command=command)
    if args.output.exists() and not args.force:
        old = Manifest.read(args.output)
        if [r.overrides for r in old.runs] != [r.overrides for r in manifest.runs]:
            print(f"error: {args.output} exists and lists other runs; --force replaces it", file=sys.stderr)
            return 1
    manifest.write(args.output)
    print(f"{args.output}: {len(manifest.runs)} runs (commit {manifest.header['commit']})")
    return 0


def _cmd_submit(args: argparse.Namespace) -> int:
    manifest = Manifest.read(args.manifest)
    workdir = _workdir(args, manifest)
    state = progress(args.manifest, manifest, workdir, args.config_dir)
    print(_summary(args.manifest, manifest, state))
    if not state.todo:
        return 0
    checkout = describe_code_version().split()[0]
    if manifest.commit and manifest.commit != checkout:
        print(f"warning: the manifest was made at commit {manifest.commit}, the checkout is at {checkout}",
              file=sys.stderr)
    options = [] if args.no_config else sbatch_options(args.config_dir)
    jobs = submit(args.manifest, state.todo, args.parallel, workdir, script=args.script,
                  max_size=args.max_array_size, chain=not args.no_chain, log_dir=args.log_dir,
                  options=[*options, *args.sbatch_options], dry_run=args.dry_run)
    for job, chunk in jobs:
        print(f"{job}\tarray {chunk.spec} (runs {chunk.offset} + index, {len(chunk.indices)} tasks)")
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    manifest = Manifest.read(args.manifest)
    state = progress(args.manifest, manifest, _workdir(args, manifest), args.config_dir)
    print(_summary(args.manifest, manifest, state) + f" (commit {manifest.header.get('commit', '?')})")
    if args.list:
        done = set(state.done)
        for i, run in enumerate(manifest.runs):
            mark = "done" if i in done else state.queued.get(i, "to do").lower()
            print(f"{i}\t{mark}\t{shlex.join(run.overrides)}\t{state.run_dirs[i]}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rlinfluence-manifest", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config-dir", type=Path, default=DEFAULT_CONFIG_DIR, help="Hydra config dir [%(default)s]")
    commands = parser.add_subparsers(dest="command", required=True)

    make = commands.add_parser("make", help="expand a sweep into a manifest")
    make.add_argument("overrides", nargs="*", help="as for `rlinfluence -m`, e.g. +experiment=main seed=0,1")
    make.add_argument("-o", "--output", type=Path, required=True)
    make.add_argument("--force", action="store_true", help="replace an existing manifest that lists other runs")
    make.set_defaults(func=_cmd_make)

    sub = commands.add_parser("submit", help="sbatch the runs that are not done or queued",
                              usage="%(prog)s manifest [options] [-- sbatch options]")
    sub.add_argument("manifest", type=Path)
    sub.add_argument("-p", "--parallel", type=int, default=64, help="tasks running at once (%%K) [%(default)s]")
    sub.add_argument("--workdir", type=Path, help="where the runs live and the jobs run [the manifest's workdir]")
    sub.add_argument("--script", type=Path, default=DEFAULT_SCRIPT, help="array script [%(default)s]")
    sub.add_argument("--max-array-size", type=int, help="split arrays at this size [MaxArraySize of the cluster]")
    sub.add_argument("--no-chain", action="store_true", help="let split arrays run side by side (K each)")
    sub.add_argument("--no-config", action="store_true",
                     help="do not take sbatch options from launcher=slurm's config")
    sub.add_argument("--log-dir", type=Path, help="job output [<manifest dir>/logs/<manifest name>]")
    sub.add_argument("--dry-run", action="store_true", help="print the sbatch commands instead")
    sub.set_defaults(func=_cmd_submit)

    status = commands.add_parser("status", help="count done, queued and remaining runs")
    status.add_argument("manifest", type=Path)
    status.add_argument("--workdir", type=Path, help="where the runs live [the manifest's workdir]")
    status.add_argument("--list", action="store_true", help="one line per run")
    status.set_defaults(func=_cmd_status)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:  # `submit m.txt -p 8 -- --time=60 --partition=gpu`: the rest is for sbatch
        extra, argv = argv[argv.index("--") + 1:], argv[:argv.index("--")]
    args = build_parser().parse_args(argv)
    if extra and args.command != "submit":
        build_parser().error("options after -- are for `submit` (sbatch options)")
    args.sbatch_options = extra
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
