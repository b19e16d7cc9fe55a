"""`task=figures figures.experiment=<name>`: any experiment's own comparison, drawn from its run dirs.

An arm is a run's method_tag, with its protocol unless clean (`iif-p50`, `ppo-paper`), as the run dir names it.
Per env of the experiment: every arm's test-return curve, and a table of each arm's final test return and its
speed-ups against standard PPO (method=ppo) of the same seed and protocol. The paper's committed data is
neither read nor written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure
from omegaconf import DictConfig

from rlinfluence.choices import ConfigError
from rlinfluence.config.paths import check_folder_name
from rlinfluence.figures.arms import STANDARD
from rlinfluence.figures.committed import REPLACE_KEY
from rlinfluence.figures.control_runs import run_name
from rlinfluence.figures.curves import CURVES_NOTE, curves_figure
from rlinfluence.figures.formatting import pm_over_seeds
from rlinfluence.figures.quantities import efficiency, final_return
from rlinfluence.figures.regenerate import in_repo, out_dir
from rlinfluence.figures.render import save_figure, save_table
from rlinfluence.figures.runs import (
    COMPARED,
    RUN_KEY,
    check_one_setting,
    run_experiments,
    tidy_csv_bytes,
    tidy_from_runs,
)
from rlinfluence.figures.tables import EFFICIENCY_COLUMNS, RT_NOTE, SE_NOTE

FINAL = "final_test_return"
PER_SEED_COLUMNS = ["arm", "method_tag", "protocol", "seed", FINAL, *EFFICIENCY_COLUMNS, "levels", "unreached"]
REFERENCE = "reference"  # standard PPO's own speed-up cells
_TABLE_NOTE = (
    "Final test return: that of each run's last evaluated round, mean ± std over seeds. Speed-ups: "
    "against standard PPO (method=ppo) under the same protocol; 'none' for a seed whose PPO run is "
    "missing or never improved on its round 0. "
)


def check_experiment(figures: DictConfig) -> None:
    """figures.experiment draws figures.runs_root's runs, and writes nowhere near the paper's data."""
    check_folder_name("figures.experiment", figures.experiment)  # it names the folder of figures.runs_root it draws
    name = f"figures.experiment={figures.experiment}"
    if figures.runs_root is None:
        raise ConfigError(f"{name} draws the runs under figures.runs_root, which is not set")
    if figures.replace:
        raise ConfigError(f"{REPLACE_KEY}={figures.replace[0]} replaces committed results, which {name} leaves alone")
    data_dir, written = in_repo(figures.data_dir).resolve(), out_dir(figures).resolve()
    if written == data_dir or data_dir in written.parents:
        raise ConfigError(
            f"figures.out_dir={figures.out_dir} is in the paper's data (figures.data_dir="
            f"{figures.data_dir}), which {name} never writes"
        )


def experiment_runs(runs_root: str | Path, experiment: str) -> pd.DataFrame:
    """The tidy rows of the experiment's finished runs with their `arm`; refused in one line when there are
    none, or when one env's runs were made with different settings (they would be compared)."""
    rows = tidy_from_runs(runs_root, {experiment})
    if rows.empty:
        raise ConfigError(
            f"figures.experiment={experiment} has no finished run under {runs_root} (experiments "
            f"with finished runs there: {', '.join(run_experiments(runs_root)) or 'none'})"
        )
    check_one_setting(
        rows,
        RUN_KEY,
        COMPARED,
        str(runs_root),
        remedy="rerun those with the others' settings, or move them to another experiment_name",
    )
    return rows.assign(arm=[run_name(tag, protocol) for tag, protocol in zip(rows["method_tag"], rows["protocol"])])


def per_seed(rows: pd.DataFrame) -> pd.DataFrame:
    """One env's runs: per arm and seed, the final test return and the SE_ave, SE_peak, RT_peak (%) against
    standard PPO of the same seed and protocol (none for PPO itself, or where that run is missing)."""
    records = []
    for (arm, seed), run in rows.groupby(["arm", "seed"], sort=True):
        tag, protocol = run["method_tag"].iloc[0], run["protocol"].iloc[0]
        standard = rows[(rows["method_tag"] == STANDARD.tag) & (rows["protocol"] == protocol) & (rows["seed"] == seed)]
        speedups = efficiency(standard, run) if tag != STANDARD.tag and len(standard) else {}
        records.append(
            {"arm": arm, "method_tag": tag, "protocol": protocol, "seed": seed, FINAL: final_return(run), **speedups}
        )
    return pd.DataFrame(records).reindex(columns=PER_SEED_COLUMNS)


def comparison_table(seeds: pd.DataFrame) -> pd.DataFrame:
    """Per arm (`per_seed`'s rows): its seeds, final test return and speed-ups, mean ± std over seeds."""
    return pd.DataFrame(
        [
            {
                "Arm": arm,
                "Seeds": str(len(of_arm)),
                "Final test return": pm_over_seeds(of_arm[FINAL], 2),
                **_speedup_cells(of_arm),
            }
            for arm, of_arm in seeds.groupby("arm", sort=True)
        ]
    )


def _speedup_cells(of_arm: pd.DataFrame) -> dict[str, str]:
    cells = {header: pm_over_seeds(of_arm[column], 1) for column, header in EFFICIENCY_COLUMNS.items()}
    cells["Unreached levels"] = f"{of_arm['unreached'].sum():.0f} / {of_arm['levels'].sum():.0f}"
    return dict.fromkeys(cells, REFERENCE) if of_arm["method_tag"].iloc[0] == STANDARD.tag else cells


@dataclass(frozen=True)
class EnvComparison:
    """What is written for one env: the curves, the table and the per-seed numbers behind it."""

    env: str
    curves: Figure
    table: pd.DataFrame
    per_seed: pd.DataFrame
    caption: str

    def write(self, directory: Path) -> list[Path]:
        per_seed_csv = directory / f"{self.env}_per_seed.csv"
        per_seed_csv.write_bytes(tidy_csv_bytes(self.per_seed))
        return [
            *save_figure(self.curves, directory / f"{self.env}_curves"),
            *save_table(self.table, directory / f"{self.env}_table", self.caption),
            per_seed_csv,
        ]


def compare_env(experiment: str, env: str, rows: pd.DataFrame) -> EnvComparison:
    arms = sorted(rows["arm"].unique())
    curves = curves_figure(rows, (env,), arms, f"{experiment}/{env}: every arm. {CURVES_NOTE}")
    seeds = per_seed(rows)
    return EnvComparison(
        env, curves, comparison_table(seeds), seeds, f"{experiment}/{env}. {_TABLE_NOTE}{SE_NOTE} {RT_NOTE}"
    )


def experiment_figures(figures: DictConfig) -> list[EnvComparison]:
    """Every env's comparison of figures.experiment, written into `out_dir(figures)` once all are made."""
    rows = experiment_runs(figures.runs_root, figures.experiment)
    comparisons = [compare_env(figures.experiment, env, of_env) for env, of_env in rows.groupby("env", sort=True)]
    directory = out_dir(figures)
    directory.mkdir(parents=True, exist_ok=True)
    for comparison in comparisons:
        comparison.write(directory)
    return comparisons
