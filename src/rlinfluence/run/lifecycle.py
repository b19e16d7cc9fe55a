"""A training run's lifecycle, for the CLI and for the analyses that train their standard run: check the
run dir (made with other settings? finished? what does it resume from?), create it, become its one writer, record the
invocation, train, and say which run dir, as it starts (logger=disabled prints nothing else until the end), and
which final test return, in one line, either way."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from rlinfluence.config.compose import preset
from rlinfluence.config.schema import OptimizerConfig
from rlinfluence.run import rundir
from rlinfluence.run.checkpoint import SUMMARY
from rlinfluence.run.identity import check_identity, write_identity
from rlinfluence.run.loop import Resume, read_resume, reset_run, train
from rlinfluence.run.writer import sole_writer


def check_run(cfg: DictConfig, run_dir: Path) -> Resume | None:
    """Every check that can refuse a training command on its run dir (made with other settings, files
    unreadable), before its first write: what the run resumes from, None when it has finished."""
    if not cfg.force:
        check_identity(run_dir, cfg)
    return resume_point(cfg, run_dir)


def resume_point(cfg: DictConfig, run_dir: Path) -> Resume | None:
    """What the run resumes from, None when it has finished; read again once its writer lock is held (the
    process that held it before may have trained rounds since the first reading)."""
    if cfg.force:
        return Resume()
    return None if rundir.is_done(run_dir) else read_resume(run_dir)


def final_test_return(run_dir: Path) -> str:
    value = json.loads((run_dir / SUMMARY).read_text())["final_test_return"]
    return "none" if value is None else f"{value:.6g}"


def start_training(cfg: DictConfig, run_dir: Path) -> dict | None:
    """Checks the run dir, creates it, takes its writer lock (run/writer.py), trains; says which run dir and
    final test return either way."""
    if check_run(cfg, run_dir) is None:
        announce_finished(run_dir)
        return None
    with sole_writer([run_dir], cfg.runs_root):
        resume = resume_point(cfg, run_dir)
        if resume is None:  # finished by the writer that held the lock before
            announce_finished(run_dir)
            return None
        prepare_run(cfg, run_dir, resume)
        summary = train(cfg, run_dir, resume)
    announce_trained(run_dir, summary)
    return summary


def announce_finished(run_dir: Path) -> None:
    print(
        f"rlinfluence: {run_dir} is already finished, final test return {final_test_return(run_dir)} "
        f"(force=true reruns it)",
        file=sys.stderr,
    )


def prepare_run(cfg: DictConfig, run_dir: Path, resume: Resume) -> None:
    """A checked run's first writes: its dir (emptied of a previous attempt with force=true), identity and
    invocation record."""
    rundir.create_run_dir(run_dir, cfg.runs_root)
    if cfg.force:
        reset_run(run_dir)
    write_identity(run_dir, cfg)
    record_invocation(cfg, run_dir)
    announce_env_optimizer(cfg)
    if resume.checkpoint is None:  # a resume names its run dir as it loads the checkpoint (run/loop.py)
        print(f"rlinfluence: training {run_dir} (env.rounds={cfg.env.rounds})", file=sys.stderr)


def announce_trained(run_dir: Path, summary: dict) -> None:
    print(
        f"rlinfluence: trained {run_dir} (env.rounds={summary['rounds']}), final test return "
        f"{final_test_return(run_dir)}",
        file=sys.stderr,
    )


def announce_env_optimizer(cfg: DictConfig) -> None:
    """BipedalWalker and Pong switch from the default optimizer to Adam (their paper settings): say so on
    the console when the run trains with its env's choice."""
    env_choice = preset(cfg.env.name).optimizer.name
    if cfg.optimizer.name == env_choice != OptimizerConfig.name:
        print(
            f"rlinfluence: env={cfg.env.name} trains with optimizer={cfg.optimizer.name}, as its config "
            f"(conf/env/{cfg.env.name}.yaml) sets",
            file=sys.stderr,
        )


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
