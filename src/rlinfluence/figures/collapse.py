"""How often seeds fail (collapse, or never take off), with the rate's Wilson interval."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import pandas as pd

from rlinfluence import metrics
from rlinfluence.config.compose import compose_config
from rlinfluence.figures import paper
from rlinfluence.figures.control_runs import Runs
from rlinfluence.figures.formatting import MISSING_CELL
from rlinfluence.figures.pairings import pick
from rlinfluence.figures.quantities import curve, final_return
from rlinfluence.figures.requirements import Output


@dataclass(frozen=True)
class Failure:
    """A failed seed of the collapse tables: its test return below `below` at its last evaluated round,
    or, with `by_round`, at every round up to that one (it has not reached `below` by then)."""

    below: float
    by_round: int | None = None

    @property
    def level(self) -> str:
        return f"{self.below:g}".replace("-", "−")  # with a typographic minus, as tables and captions print it

    @property
    def criterion(self) -> str:
        if self.by_round is None:
            return f"final test return < {self.level}"
        return f"test return < {self.level} up to round {self.by_round}"

    @property
    def whose(self) -> str:
        """The criterion as a caption says which seeds fail: `Seeds whose ...`."""
        if self.by_round is None:
            return f"whose final test return stays below {self.level}"
        return f"whose test return has not reached {self.level} by round {self.by_round}"

    def failed(self, run: pd.DataFrame) -> bool:
        if self.by_round is None:
            return final_return(run) < self.below
        return (metrics.first_round_reaching(curve(run), self.below) or 10**9) > self.by_round


@functools.cache
def _criteria() -> dict:
    """figures.collapse in conf/config.yaml: the envs that have a failure criterion, and theirs."""
    return dict(compose_config([]).figures.collapse)


def has_failure_criterion(env: str) -> bool:
    return env in _criteria()


@functools.cache
def failure(env: str) -> Failure:
    """What counts as a failed seed of `env`."""
    criterion = _criteria()[env]
    return Failure(criterion.below, criterion.by_round)


def collapse_table(output: Output[Runs], rows: pd.DataFrame) -> pd.DataFrame:
    """How many seeds of each arm fail (`failure`), with the rate's Wilson 95 % interval."""
    table = []
    for env in output.runs.envs:
        criterion = failure(env)
        for protocol in output.runs.protocols:
            for arm in output.runs.arms:
                runs = pick(rows[rows["env"] == env], arm, protocol)
                failed_seeds = sorted(seed for seed, run in runs.groupby("seed") if criterion.failed(run))
                rate = metrics.rate_ci(len(failed_seeds), runs["seed"].nunique())
                table.append(
                    {
                        "Env": paper.ENV_TITLES[env],
                        "Failure": criterion.criterion,
                        "Protocol": protocol,
                        "Arm": arm.label,
                        "Failed / seeds": f"{len(failed_seeds)} / {rate.n}",
                        "Rate [95 % Wilson CI]": (
                            f"{100 * rate.mean:.0f} % [{100 * rate.low:.0f}, {100 * rate.high:.0f}]"
                        ),
                        "Failed seeds": ", ".join(map(str, failed_seeds)) or MISSING_CELL,
                    }
                )
    return pd.DataFrame(table)
