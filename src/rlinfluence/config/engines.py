"""The engines a control run trains on (`engine`), and the seeds of an engine=stacked command (`seeds`): their names
and what each can run, checked with the rest of the config (validation.py) before anything is built."""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from rlinfluence.choices import ConfigError, require, require_one_of

DEFAULT, STACKED = "default", "stacked"
ENGINES = (DEFAULT, STACKED)
# The settings whose non-default values the stacked round does not implement: key, the value it runs.
STACKED_ONLY = (("env.agent", "control"),)


def seed_list(cfg: DictConfig) -> list[int]:
    """The seeds of an engine=stacked command: `seeds`, or `seed` alone."""
    return [cfg.seed] if cfg.seeds is None else list(cfg.seeds)


def check_engine(cfg: DictConfig) -> None:
    """One line (ConfigError) for an engine, a seed list or a setting the stacked engine cannot run."""
    require_one_of("engine", cfg.engine, ENGINES)
    if cfg.engine == DEFAULT:
        if cfg.seeds is not None:
            raise ConfigError(f"seeds={list(cfg.seeds)} lists the seeds of engine=stacked: add engine=stacked")
        return
    if cfg.task != "train":  # an analysis trains and looks into one seed's run, on whichever engine
        require(
            cfg.seeds is None,
            f"task={cfg.task} looks into one seed's run: give engine=stacked seed=K, not seeds={list(cfg.seeds or [])} "
            "(a set of seeds is task=train's)",
        )
    seeds = seed_list(cfg)
    require(
        len(seeds) > 0 and all(seed >= 0 for seed in seeds) and len(set(seeds)) == len(seeds),
        f"seeds={seeds} must list distinct seeds >= 0",
    )
    for key, value in STACKED_ONLY:
        actual = OmegaConf.select(cfg, key)
        require(actual == value, f"engine=stacked runs {key}={value} only; this command has {key}={actual}")
