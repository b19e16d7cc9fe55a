"""engine=stacked against engine=default (src/rlinfluence/control/): the same algorithm, shown statistically.

engine=stacked trains a config's seeds in one process with batched matmuls, which round unlike engine=default's
per-seed ones under a CPU's native kernels, so a seed's curve is not engine=default's bit for bit: over many seeds,
its results must not differ from engine=default's.
FrozenLake IIF (p = 50 %) and standard PPO, 20 seeds of experiment `engine_equivalence` made by engine=stacked,
against the main comparison's committed runs of the same settings (every committed seed of each arm, clean protocol):
final test return and IIF's SE_ave, each engine's seeds an independent sample. The stacked runs arrive as they finish:
without them the table says "not run yet" with their command, with part of them it counts the seeds there are.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
from matplotlib.figure import Figure

from rlinfluence import metrics
from rlinfluence.figures.arms import IIF, STANDARD, Arm
from rlinfluence.figures.control_runs import ArmRuns, Runs
from rlinfluence.figures.curves import CURVES_NOTE, curves_figure
from rlinfluence.figures.fidelity import Sources
from rlinfluence.figures.formatting import MISSING_CELL, pm
from rlinfluence.figures.quantities import curve, final_return
from rlinfluence.figures.requirements import FigureData, Output, RestrictableByEnvs
from rlinfluence.run.identity import CLEAN

ENGINE_EXPERIMENT = "engine_equivalence"
ENGINE_ENVS = ("frozenlake",)
ARMS = (IIF, STANDARD)
STACKED_SEEDS = 20
DEFAULT_SEEDS = 10  # the fewest committed seeds an arm of engine=default is compared with
STACKED_SOURCE, DEFAULT_SOURCE = "engine=stacked", "engine=default"
NOT_RUN = "not run yet"


@dataclass(frozen=True)
class StackedRuns(ArmRuns, RestrictableByEnvs):
    """engine=stacked's runs of the study's methods, one process per method packing every seed
    (cli.pack_seeds); `arms` are those of its methods this part draws."""

    arms: tuple[Arm, ...]
    envs: tuple[str, ...] = ENGINE_ENVS
    experiment: str = ENGINE_EXPERIMENT
    seeds: int = STACKED_SEEDS
    methods: str = "iif,ppo"
    protocols: tuple[str, ...] = (CLEAN,)
    all_seeds: bool = True

    def command_for(self, env: str) -> str:
        return (
            f"rlinfluence -m env={env} method={self.methods} seed='range({self.seeds})' engine=stacked "
            f"experiment_name={self.experiment}"
        )


@dataclass(frozen=True)
class EngineRuns(Sources):
    """Each engine's runs of each arm, an arm's seeds its own (the samples are independent). Only engine=default's
    committed runs must be complete for the output to be made; the stacked ones are drawn as they arrive."""

    @property
    def committed(self) -> Sources:
        return Sources(tuple((label, runs) for label, runs in self.parts if label == DEFAULT_SOURCE))

    def shortfalls(self, data: FigureData) -> dict[str, str]:
        return self.committed.shortfalls(data)

    @property
    def stacked_command(self) -> str:
        """The command that makes the stacked runs (one sweep for every arm)."""
        return next(runs.command for label, runs in self.parts if label == STACKED_SOURCE)


ENGINE_RUNS = EngineRuns(
    (
        *((STACKED_SOURCE, StackedRuns((arm,))) for arm in ARMS),
        *(
            (DEFAULT_SOURCE, Runs("main", (arm,), envs_needed=ENGINE_ENVS, seeds_needed=DEFAULT_SEEDS, all_seeds=True))
            for arm in ARMS
        ),
    )
)
SOURCES = (DEFAULT_SOURCE, STACKED_SOURCE)
FINAL, SE_AVE = "final test return", "SE_ave (%) against standard PPO of the same seed and engine"


def _per_seed(rows: pd.DataFrame, source: str) -> dict[str, pd.Series]:
    """Per quantity of each arm (`<arm>: <quantity>`), its value for each seed of `source`."""
    runs = {key: run for key, run in rows[rows["source"] == source].groupby(["arm", "seed"])}

    def of_arm(arm: Arm, value) -> pd.Series:
        return pd.Series({seed: value(seed) for label, seed in runs if label == arm.label}, dtype=float)

    return {
        **{
            f"{arm.label}: {FINAL}": of_arm(arm, lambda seed, arm=arm: final_return(runs[arm.label, seed]))
            for arm in ARMS
        },
        # SE_ave pairs IIF with standard PPO of the same seed (and engine)
        f"{IIF.label}: {SE_AVE}": of_arm(
            IIF,
            lambda seed: (
                metrics.se_ave(curve(runs[STANDARD.label, seed]), curve(runs[IIF.label, seed]))
                if (STANDARD.label, seed) in runs
                else float("nan")
            ),
        ),
    }


def _seeds_cell(values: pd.Series, needed: int) -> str:
    return f"{len(values)} of {needed}" if len(values) < needed else str(len(values))


def _summary(values: pd.Series, digits: int) -> str:
    return pm(values.mean(), values.std(), digits) if len(values) > 1 else f"{values.mean():.{digits}f}"


def engine_table(output: Output[EngineRuns], rows: pd.DataFrame) -> pd.DataFrame:
    """Per quantity: each engine's seeds (mean ± std), the difference of means stacked − default with its
    percentile-bootstrap 95 % CI, and the two-sided Mann–Whitney U test."""
    default, stacked = (_per_seed(rows, source) for source in SOURCES)
    table = []
    for quantity, alone in default.items():
        mine = stacked[quantity].dropna()
        alone = alone.dropna()
        digits = 1 if quantity.endswith(SE_AVE) else 3
        row = {
            "Quantity": quantity,
            "Seeds, default": str(len(alone)),
            "default: mean ± std": _summary(alone, digits),
            "Seeds, stacked": _seeds_cell(mine, STACKED_SEEDS),
        }
        if mine.empty:
            table.append(row | {"stacked: mean ± std": f"{NOT_RUN} (`{output.runs.stacked_command}`)"})
            continue
        difference = metrics.difference_of_means_ci(mine, alone)
        ranks = metrics.rank_test(mine, alone)
        table.append(
            row
            | {
                "stacked: mean ± std": _summary(mine, digits),
                "stacked − default [95 % CI]": f"{difference.mean:+.{digits}f} "
                f"[{difference.low:+.{digits}f}, {difference.high:+.{digits}f}]",
                "Mann–Whitney U": f"{ranks.u:g}",
                "p (two-sided)": f"{ranks.p:.3f}",
            }
        )
    return pd.DataFrame(table).fillna(MISSING_CELL)


def engine_curves(output: Output[EngineRuns], rows: pd.DataFrame) -> Figure:
    """Both engines' test-return curves, one panel per arm (the study has one env), one colour per engine."""
    by_arm = rows.assign(env=rows["arm"], arm=rows["source"])
    return curves_figure(by_arm, tuple(arm.label for arm in ARMS), list(SOURCES), f"{output.title}: {CURVES_TITLE}")


CURVES_TITLE = "FrozenLake, test return of each engine's seeds"
ENGINE_NOTE = (
    "FrozenLake, IIF (p = 50 %) and standard PPO: 20 seeds trained by engine=stacked (experiment engine_equivalence) "
    "against the main comparison's committed runs of the same settings by engine=default (every committed seed of "
    "each arm, clean protocol), each engine's seeds an independent sample."
)
OUTPUTS: tuple[Output, ...] = (
    Output(
        "engine_equivalence",
        "Engine equivalence",
        ENGINE_NOTE + " Final test return: the last round's; SE_ave as in Fig. 6b, each IIF seed against standard PPO "
        "of the same seed and engine. Mean ± std over seeds; the difference of means stacked − default with a 95 % "
        "percentile-bootstrap CI (scipy, 10,000 resamples, fixed seed, each engine's seeds resampled on their own); "
        "the two-sided Mann–Whitney U test (scipy) of the stacked seeds against the default ones.",
        ENGINE_RUNS,
        engine_table,
    ),
    Output(
        "engine_equivalence_curves",
        "Engine equivalence: curves",
        ENGINE_NOTE + " " + CURVES_NOTE,
        ENGINE_RUNS,
        engine_curves,
    ),
)
