"""The single entry point: `rlinfluence` / `python -m rlinfluence` (a Hydra app).

`task=train` (default) trains one run into its deterministic run dir, resuming from its checkpoint
and skipping it when it is already finished; `task=figures` regenerates the paper's tables and figures.
"""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from rlinfluence.config import ConfigError, register_schemas, validate
from rlinfluence.rundir import is_done, register_resolvers

# The repo's top-level conf/ (the package is installed editable from the checkout, see README).
CONFIG_DIR = str(Path(__file__).resolve().parents[2] / "conf")

register_schemas()
register_resolvers()


def run_task(cfg: DictConfig, run_dir: Path) -> dict | None:
    """Validate, then dispatch on `task`. Separate from the Hydra wrapper so tests can call it."""
    validate(cfg)
    if cfg.task == "figures":
        from rlinfluence.figures import main_from_config

        main_from_config(cfg)
        return None
    from rlinfluence.round import reset_run, train

    if cfg.force:
        reset_run(run_dir)
    elif is_done(run_dir):
        print(f"rlinfluence: {run_dir} is already finished (force=true reruns it)", file=sys.stderr)
        return None
    record_invocation(cfg, run_dir)
    return train(cfg, run_dir)


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


@hydra.main(version_base="1.3", config_path=CONFIG_DIR, config_name="config")
def main(cfg: DictConfig) -> None:
    try:
        run_task(cfg, Path(HydraConfig.get().runtime.output_dir))
    except ConfigError as error:
        print(f"rlinfluence: config error: {error}", file=sys.stderr)
        raise SystemExit(2) from None
