"""The single entry point: `rlinfluence` / `python -m rlinfluence` (a Hydra app).

`task=train` (default) trains one run into its run dir (run/rundir.py: the directory is the run's whole
configuration), resuming from its checkpoint and skipping it when it is already finished (run/lifecycle.py);
every other `task=` is a registered task (run/tasks.py: `figures` regenerates the paper's tables and
figures, `diagnose` and `intervene` are the analyses of analyses/). A command that cannot run as given (a
config error, a run dir it cannot continue) is refused in one line with exit code 2 before it writes
anything; a sweep (`-m`) is checked job by job before its first job starts. Every command ends with a
line that says what it did and where; an interrupted run, with the round it stopped in (run/interrupts.py).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import os
import shlex
import sys
import warnings
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import hydra
from hydra._internal.utils import get_args_parser  # the parser of Hydra's command line (no public API)
from hydra.core.hydra_config import HydraConfig
from hydra.errors import HydraException
from omegaconf import DictConfig

from rlinfluence.choices import ConfigError
from rlinfluence.config.compose import app_search_path, one_line
from rlinfluence.config.paths import CONFIG_DIR
from rlinfluence.config.seeds import listed_seeds
from rlinfluence.launch.manifest import (
    Composer,
    expand_sweep,
    overlay_seed_sweep,
    pack_seed_sweep,
    replaced,
    single_command,
)
from rlinfluence.run.interrupts import RunInterrupted
from rlinfluence.run.tasks import TRAIN, load_task

# The modules that import torch (the run dirs, the round loop, validation) are imported by the functions that
# run a command: what Hydra answers before any command runs (--help, --cfg job) then takes a fraction of a
# second, not the seconds torch takes.

REFUSED = 2  # the exit code of every command refused as given; 1 stays a crash's
FAILED = 1  # a run stopped by a round it cannot train on (round.RoundFailed), said in one line


# Any: train's summary (or None when already finished), else what the task returns (a DataFrame, replay
# results, ...); the task registry (run/tasks.py) holds Callable[[DictConfig], Any].
def run_task(cfg: DictConfig, run_dir: Path | None = None) -> Any:
    """Validate, then dispatch on `task`. Separate from the Hydra wrapper so tests can call it; `run_dir`
    defaults to the config's own (tests pass a temporary one)."""
    from rlinfluence.config.engines import STACKED
    from rlinfluence.run import rundir
    from rlinfluence.run.lifecycle import start_training
    from rlinfluence.run.stacked import start_stacked
    from rlinfluence.validation import validate

    validate(cfg)
    if cfg.task != TRAIN:
        return load_task(cfg.task)(cfg)
    if cfg.engine == STACKED:  # its seeds' run dirs under runs_root: validation refuses any other task
        return start_stacked(cfg)
    return start_training(cfg, run_dir or rundir.run_dir(cfg))


def refuse(message: str) -> NoReturn:
    print(f"rlinfluence: {message}", file=sys.stderr)
    raise SystemExit(REFUSED)


def quiet_libraries() -> None:
    """Library notices meant for developers (transformers' FutureWarnings, gymnasium's ANSI-coloured
    warnings, matplotlib's note on categorical units) are not shown, unless the user asks for warnings
    (python -W, PYTHONWARNINGS). What a user must act on, an out-of-date env id, validation says in one line."""
    if not sys.warnoptions:
        warnings.simplefilter("ignore", FutureWarning)
        warnings.filterwarnings("ignore", module=r"gymnasium(\.|$)")
    logging.getLogger("matplotlib.category").setLevel(logging.WARNING)


@hydra.main(version_base="1.3", config_path=CONFIG_DIR, config_name="config")
def hydra_app(cfg: DictConfig) -> None:
    from rlinfluence.round import RoundFailed
    from rlinfluence.run.checkpoint import RunDirError

    try:
        with app_search_path(list(HydraConfig.get().searchpath)):
            run_task(cfg)
    except ConfigError as error:
        refuse(f"config error: {error}")
    except RunDirError as error:
        refuse(str(error))
    except RunInterrupted as stop:
        print(f"rlinfluence: {stop}", file=sys.stderr)
        raise SystemExit(stop.exit_code) from None
    except RoundFailed as error:
        print(f"rlinfluence: {error}", file=sys.stderr)
        raise SystemExit(FAILED) from None


# ----------------------------------------------------------------------------- sweeps (-m)

TRAINED, RESUMED, SKIPPED = "trained", "resumed", "skipped"
NOT_FINISHED = "failed or not run"  # a job that crashed, was interrupted, or was not reached


@dataclass
class SweepJob:
    run_dir: Path
    plan: str  # what the sweep is to do with the run: TRAINED (from scratch), RESUMED or SKIPPED


def command_line(argv: list[str]) -> argparse.Namespace | None:
    """The command line as Hydra's own parser reads it; None for arguments it refuses (Hydra says why)."""
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            return get_args_parser().parse_args(argv)
    except SystemExit:
        return None


def sweep_overrides(argv: list[str]) -> list[str] | None:
    """The overrides of `rlinfluence -m ...`; None for a single run, for arguments Hydra refuses (it says why),
    and when Hydra's flags (--help, --cfg, -cn, ...) change what the command does."""
    args = command_line(argv)
    if args is None:
        return None
    flags = (
        args.help,
        args.hydra_help,
        args.cfg,
        args.info,
        args.shell_completion,
        args.run,
        args.config_path,
        args.config_name,
        args.config_dir,
        args.experimental_rerun,
    )
    return args.overrides if args.multirun and not any(flags) else None


def pack_seeds(overrides: list[str]) -> dict[str, list[str]]:
    """`-m ... engine=stacked seed=<choice or range>`: each config's seeds in one process (launch/manifest.py's
    `pack_seed_sweep`, which manifests use too); refused in one line when it cannot be packed."""
    try:
        return pack_seed_sweep(overrides)
    except ConfigError as error:
        refuse(f"config error: {error}")


def single_run_seeds(argv: list[str]) -> dict[str, list[str]]:
    """A single command's `seeds=` as the list it names (config/seeds.py); refused in one line when it is not one."""
    args = command_line(argv)
    if args is None or args.multirun:
        return {}
    try:
        return listed_seeds(args.overrides)
    except ConfigError as error:
        refuse(f"config error: {error}")


def show_sweep_jobs(argv: list[str]) -> bool:
    """`-m <sweep> --cfg job`: a sweep has no one config (Hydra refuses the pair with a traceback); its jobs are
    printed on stdout, one line of overrides each, as `-m` would run them, and how to see one's config. False for
    any other command."""
    args = command_line(argv)
    if args is None or not (args.multirun and args.cfg):
        return False
    with Composer() as composer:
        words = args.overrides + overlay_seed_sweep(composer, args.overrides)
        packed = replaced(words, pack_seeds(words))
        jobs = [single_command(job) for job in expand_sweep(composer.sweep_params(packed), packed)]
    for job in jobs:
        print(shlex.join(job))
    print(
        f"rlinfluence: the sweep's {len(jobs)} job(s) above, one per line; a sweep has no one config: "
        f"`rlinfluence <a job's overrides> --cfg {args.cfg}` shows that job's",
        file=sys.stderr,
    )
    return True


def check_sweep(overrides: list[str]) -> list[SweepJob]:
    """Compose and check every job of the sweep before the first one starts (a bad value in job 5 must
    not be found after jobs 1-4 have trained): one line and exit 2 on the first that cannot run, with
    nothing written; first of all, that its launcher runs here (launcher=slurm on a machine without SLURM).
    Returns the training jobs' run dirs and plans."""
    from rlinfluence.launch.slurm import check_launcher
    from rlinfluence.run import rundir
    from rlinfluence.run.checkpoint import RunDirError
    from rlinfluence.run.lifecycle import check_run
    from rlinfluence.run.stacked import seed_configs
    from rlinfluence.validation import validate

    with Composer() as composer:
        try:
            check_launcher(composer.compose(overrides, multirun=True))
        except ConfigError as error:
            refuse(f"config error: {error}")
        try:
            jobs = expand_sweep(composer.sweep_params(overrides), overrides)
        except ValueError:
            # a sweep the manifest cannot enumerate (an interval, Hydra's own keys): Hydra checks it per job
            return []
        planned = []
        shared = set.intersection(*(set(job) for job in jobs))
        for job in jobs:
            cfg = composer.compose(job)
            named = f"(sweep job {' '.join(o for o in job if o not in shared)})"
            try:
                validate(cfg)
                for run_cfg in seed_configs(cfg) if cfg.task == TRAIN else ():  # engine=stacked: a run per seed
                    run_dir = rundir.run_dir(run_cfg)
                    resume = check_run(run_cfg, run_dir)
                    plan = SKIPPED if resume is None else RESUMED if resume.checkpoint else TRAINED
                    planned.append(SweepJob(run_dir, plan))
            except ConfigError as error:
                refuse(f"config error: {error} {named}")
            except RunDirError as error:
                refuse(f"{error} {named}")
    return planned


def sweep_summary(jobs: list[SweepJob]) -> str:
    """What a sweep did, read from its run dirs once it has ended (whichever launcher ran the jobs)."""
    from rlinfluence.run import rundir

    counts = Counter(job.plan if rundir.is_done(job.run_dir) else NOT_FINISHED for job in jobs)
    where = os.path.commonpath([str(job.run_dir) for job in jobs])
    parts = ", ".join(f"{counts[plan]} {plan}" for plan in (TRAINED, RESUMED, SKIPPED, NOT_FINISHED))
    return f"sweep of {len(jobs)} runs: {parts}; run dirs under {where}"


def main() -> None:
    """Hydra's own errors (a bad override, an unknown option, a wrong type) are config errors too: one
    line and exit 2, like the app's. HYDRA_FULL_ERROR=1 makes Hydra raise them instead of printing
    them over several lines and exiting 1; a user who sets it gets the traceback. A sweep is checked
    whole before it starts and ends with what it did."""
    previous = os.environ.get("HYDRA_FULL_ERROR")
    traceback_wanted = previous == "1"
    os.environ["HYDRA_FULL_ERROR"] = "1"
    quiet_libraries()
    jobs: list[SweepJob] = []
    try:
        if show_sweep_jobs(sys.argv[1:]):
            return
        sys.argv = replaced(sys.argv, single_run_seeds(sys.argv[1:]))
        overrides = sweep_overrides(sys.argv[1:])
        if overrides is not None:
            with Composer() as composer:  # engine=stacked beside an overlay's seed sweep packs that sweep
                spelt = overlay_seed_sweep(composer, overrides)
            sys.argv, overrides = sys.argv + spelt, overrides + spelt
            packing = pack_seeds(overrides)
            # Hydra reads the command line: the packed overrides replace the seed sweep there too
            sys.argv = replaced(sys.argv, packing)
            jobs = check_sweep(replaced(overrides, packing))
        hydra_app()
    except HydraException as error:
        if traceback_wanted:
            raise
        refuse(f"config error: {one_line(error)}")
    finally:  # a Ctrl-C ends in console.main, after this line
        # put it back: a process that calls main twice (the tests) must not inherit the first call's setting
        os.environ.pop("HYDRA_FULL_ERROR") if previous is None else os.environ.update(HYDRA_FULL_ERROR=previous)
        if jobs:
            print(f"rlinfluence: {sweep_summary(jobs)}", file=sys.stderr)
