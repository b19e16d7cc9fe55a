"""The single entry point: `rlinfluence` / `python -m rlinfluence` (a Hydra app).

`task=train` (default) trains one run into its run dir (rundir.py: the directory is the run's whole
configuration), resuming from its checkpoint and skipping it when it is already finished;
every other `task=` is a registered task (tasks.py: `figures` regenerates the paper's tables and
figures, `diagnose` and `intervene` are the analyses of analyses/). A command that cannot run as given (a
config error, a run dir it cannot continue) is refused in one line with exit code 2 before it writes
anything.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.errors import HydraException, MissingConfigException
from omegaconf import DictConfig, OmegaConf

from rlinfluence import rundir
from rlinfluence.checkpoint import RunDirError
from rlinfluence.config import ConfigError
from rlinfluence.envs import env_optimizer
from rlinfluence.paths import CONFIG_DIR
from rlinfluence.round import Resume, read_resume, reset_run, train
from rlinfluence.tasks import TRAIN, load_tasks
from rlinfluence.validation import validate

REFUSED = 2  # the exit code of every command refused as given; 1 stays a crash's


def run_task(cfg: DictConfig, run_dir: Path | None = None) -> dict | None:
    """Validate, then dispatch on `task`. Separate from the Hydra wrapper so tests can call it; `run_dir`
    defaults to the config's own (tests pass a temporary one)."""
    validate(cfg)
    if cfg.task != TRAIN:
        return load_tasks()[cfg.task](cfg)
    return start_training(cfg, run_dir or rundir.run_dir(cfg))


def start_training(cfg: DictConfig, run_dir: Path) -> dict | None:
    """Every check that can refuse the command comes before its first write (creating the run dir)."""
    if not cfg.force:
        rundir.check_identity(run_dir, cfg)
        if rundir.is_done(run_dir):
            print(f"rlinfluence: {run_dir} is already finished (force=true reruns it)", file=sys.stderr)
            return None
    resume = Resume() if cfg.force else read_resume(run_dir)
    rundir.create_run_dir(run_dir, cfg.runs_root)
    if cfg.force:
        reset_run(run_dir)
    rundir.write_identity(run_dir, cfg)
    record_invocation(cfg, run_dir)
    announce_env_optimizer(cfg)
    return train(cfg, run_dir, resume)


def announce_env_optimizer(cfg: DictConfig) -> None:
    """BipedalWalker and Pong switch to Adam (their paper settings): say so on the console."""
    if cfg.optimizer.name == env_optimizer(cfg.env.name):
        print(f"rlinfluence: env={cfg.env.name} trains with optimizer={cfg.optimizer.name}, as its config "
              f"(conf/env/{cfg.env.name}.yaml) sets", file=sys.stderr)


def record_invocation(cfg: DictConfig, run_dir: Path) -> None:
    """Hydra's `.hydra/` record (config, hydra, overrides) of the invocation that trains in `run_dir`.

    Hydra's own writing of it is switched off (`hydra.output_subdir: null`): it happens before any
    check, so a rejected command or a rerun of a finished run would overwrite the record of the
    invocation that produced the run's results."""
    if not HydraConfig.initialized():  # called from Python (tests, benchmarks), not from the CLI
        return
    hydra_cfg = HydraConfig.get()
    record = run_dir / ".hydra"
    record.mkdir(parents=True, exist_ok=True)
    OmegaConf.save(cfg, record / "config.yaml")
    OmegaConf.save(OmegaConf.create({"hydra": hydra_cfg}), record / "hydra.yaml")
    OmegaConf.save(hydra_cfg.overrides.task, record / "overrides.yaml")


def refuse(message: str) -> None:
    print(f"rlinfluence: {message}", file=sys.stderr)
    raise SystemExit(REFUSED)


@hydra.main(version_base="1.3", config_path=CONFIG_DIR, config_name="config")
def hydra_app(cfg: DictConfig) -> None:
    try:
        run_task(cfg)
    except ConfigError as error:
        refuse(f"config error: {error}")
    except RunDirError as error:
        refuse(str(error))


def one_line(error: HydraException) -> str:
    """Hydra's multi-line report of a composition error in one line: its own lines, the first line of
    its cause, the options of a missing choice; never the config search path."""
    lines = [line.strip().rstrip(".") for line in str(error).split("\nConfig search path:")[0].splitlines()
             if line.strip()]
    if isinstance(error, MissingConfigException) and error.options:
        return f"{lines[0]} (options: {', '.join(error.options)})"
    if error.__cause__ is not None:
        lines.insert(1, str(error.__cause__).splitlines()[0])
    return "; ".join(lines)


def main() -> None:
    """Hydra's own errors (a bad override, an unknown option, a wrong type) are config errors too: one
    line and exit 2, like the app's. HYDRA_FULL_ERROR=1 makes Hydra raise them instead of printing
    them over several lines and exiting 1; a user who sets it gets the traceback."""
    traceback_wanted = os.environ.get("HYDRA_FULL_ERROR") == "1"
    os.environ["HYDRA_FULL_ERROR"] = "1"
    try:
        hydra_app()
    except HydraException as error:
        if traceback_wanted:
            raise
        refuse(f"config error: {one_line(error)}")
