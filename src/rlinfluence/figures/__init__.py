"""The paper's figures and tables, regenerated from run directories or from the committed tidy CSVs.

`runs` turns run directories into the tidy table; `catalogue` lists every figure and table (an `Output` of
`requirements`: what it needs, e.g. the runs of an experiment overlay, `control_runs`, and how it is built,
e.g. `curves`, `tables`); `render` writes byte-reproducible files; `regenerate` ties them together.
"""

from collections import Counter
from pathlib import Path

from omegaconf import DictConfig

from rlinfluence.choices import ConfigError
from rlinfluence.config.paths import REPO_ROOT, check_writable
from rlinfluence.figures.experiment import EnvComparison, check_experiment, experiment_figures
from rlinfluence.figures.regenerate import (
    MADE,
    MISSING,
    PAPER_OUT_DIR,
    PARTIAL,
    in_repo,
    main_from_config,
    out_dir,
    regenerate,
)
from rlinfluence.figures.runs import tidy_from_runs
from rlinfluence.run.tasks import register


def check_figures(cfg: DictConfig) -> None:
    """The figures' inputs exist (a missing one would only list every output as missing). Data and output
    dirs are the repo's when relative (regenerate.in_repo), the runs root the working directory's. One's own
    experiment reads no data dir: it draws from a pip install, which has no paper_figures/."""
    data_dir = [("figures.data_dir", cfg.figures.data_dir, REPO_ROOT)] if cfg.figures.experiment is None else []
    for key, given, start in [*data_dir, ("figures.runs_root", cfg.figures.runs_root, Path.cwd())]:
        if given is not None and not (start / given).is_dir():  # an absolute `given` ignores `start`
            raise ConfigError(f"{key}={given} is not a directory (relative paths start at {start})")
    if cfg.figures.experiment is not None:
        check_experiment(cfg.figures)  # first: it needs figures.runs_root, where its out_dir is by default
    check_writable("figures.out_dir", out_dir(cfg.figures))
    if cfg.figures.runs_root is not None and cfg.figures.experiment is None:  # the refresh rewrites the tidy CSVs
        check_writable("figures.data_dir", in_repo(cfg.figures.data_dir))


@register("figures", check=check_figures)
def figures(cfg: DictConfig) -> list[tuple[str, str, str]] | list[EnvComparison]:
    if cfg.figures.experiment is not None:
        return own_experiment(cfg)
    results = main_from_config(cfg)
    counts = Counter(status for _, status, _ in results)
    print(
        f"rlinfluence: {counts[MADE]} made, {counts[PARTIAL]} partial, {counts[MISSING]} missing (MISSING.md), "
        f"written to {cfg.figures.out_dir or PAPER_OUT_DIR}"
    )
    return results


def own_experiment(cfg: DictConfig) -> list[EnvComparison]:
    comparisons = experiment_figures(cfg.figures)
    envs = ", ".join(
        f"{c.env} ({c.table['Arm'].size} arm(s), {c.per_seed['seed'].nunique()} seed(s))" for c in comparisons
    )
    print(f"rlinfluence: {cfg.figures.experiment}: curves and table of {envs}, written to {out_dir(cfg.figures)}")
    return comparisons


__all__ = ["main_from_config", "regenerate", "tidy_from_runs"]
