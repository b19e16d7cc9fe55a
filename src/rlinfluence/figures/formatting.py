"""How numbers are written in the tables (every cell is a string) and the order envs are listed in."""

from __future__ import annotations

import numpy as np
import pandas as pd

from rlinfluence import metrics
from rlinfluence.figures import paper

MISSING_CELL = "—"


def in_paper_env_order(column: pd.Series) -> pd.Series:
    """Sort key for `sort_values`: the env column in the paper's env order, other columns as they are."""
    return column.map({env: i for i, env in enumerate(paper.ENV_ORDER)}) if column.name == "env" else column


def pm(mean: float, spread: float, digits: int) -> str:
    return f"{mean:.{digits}f} ± {spread:.{digits}f}"


def pm_over_seeds(values: pd.Series, digits: int) -> str:
    """Mean ± std over the seeds that have a value, saying how many have none (e.g. a time to a level
    never reached): a mean over fewer seeds than the row's must not pass for one over all of them."""
    missing = int(values.isna().sum())
    if missing == len(values):
        return f"none ({missing} of {missing} seeds)"
    # One value has no spread: the mean alone, not "± nan".
    summary = pm(values.mean(), values.std(), digits) if len(values) - missing > 1 else f"{values.mean():.{digits}f}"
    return f"{summary} (none for {missing} of {len(values)} seeds)" if missing else summary


def iqm_cell(values: np.ndarray, digits: int) -> str:
    """The interquartile mean of `values` with its 95 % percentile-bootstrap CI (metrics.bootstrap_ci)."""
    ci = metrics.bootstrap_ci(values)
    return f"{ci.mean:.{digits}f} [{ci.low:.{digits}f}, {ci.high:.{digits}f}]"
