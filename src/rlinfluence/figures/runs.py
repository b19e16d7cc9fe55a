"""Run directories → the tidy results table, and the tidy CSVs committed under paper_figures/data/.

A run directory (written by the training loop) holds `metrics.csv` (one row per round),
`summary.json` (what the run is) and, once it has finished, an empty `DONE` marker. Only finished
runs enter the tidy table: a figure must never be drawn from a run that stopped half-way.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from rlinfluence.checkpoint import RunDirError
from rlinfluence.rundir import DONE, IDENTITY

log = logging.getLogger(__name__)

# config_hash is the run dir's hash of its non-default settings (rundir.py), DEFAULT_SETTINGS when there
# are none; empty for rows committed before the tidy CSVs carried it (their run dirs are gone).
RUN_COLUMNS = ["experiment", "env", "method", "method_tag", "p", "optimizer", "protocol", "config_hash", "seed"]
DEFAULT_SETTINGS = "default"
ROUND_COLUMNS = ["round", "env_steps", "test_return", "n_records", "n_kept",
                 "time_collect", "time_influence", "time_update", "time_eval"]
TIDY_COLUMNS = RUN_COLUMNS + ROUND_COLUMNS
# One run = one curve; a second run with the same key would be ambiguous in every figure.
RUN_KEY = ["experiment", "env", "method_tag", "protocol", "seed"]
COMPARED = ["experiment", "env"]  # the runs one figure compares with each other: every arm and seed of an env
# Enough digits to round-trip every value that matters, few enough to keep the diffs readable.
CSV_FLOAT_FORMAT = "%.10g"


@dataclass(frozen=True)
class RunScan:
    finished: list[Path]
    unfinished: list[Path]  # started (metrics.csv or summary.json) but no DONE marker


def scan_runs(runs_root: str | Path) -> RunScan:
    """Every run directory under `runs_root`, split by whether its DONE marker exists (sorted)."""
    root = Path(runs_root)
    run_dirs = sorted({p.parent for name in ("metrics.csv", "summary.json") for p in root.rglob(name)})
    return RunScan(
        finished=[d for d in run_dirs if (d / DONE).exists()],
        unfinished=[d for d in run_dirs if not (d / DONE).exists()],
    )


def run_agent(run_dir: Path) -> str:
    """The agent that made a run (agents.py; language-model runs have their own tidy CSV, figures/rlhf.py).
    Identities from before env.agent existed lack the key: those runs are control runs."""
    path = run_dir / IDENTITY
    settings = json.loads(path.read_text())["settings"] if path.exists() else {}
    return settings.get("env.agent", "control")


def settings_hash(summary: dict) -> str:
    """A run's config_hash as the tidy rows store it (a run of default settings has none in summary.json)."""
    return summary.get("config_hash") or DEFAULT_SETTINGS


def _read_run(run_dir: Path) -> pd.DataFrame:
    summary = json.loads((run_dir / "summary.json").read_text())
    run = {key: summary[key] for key in RUN_COLUMNS if key != "config_hash"}
    rounds = pd.read_csv(run_dir / "metrics.csv", usecols=ROUND_COLUMNS)
    return rounds.assign(**run, config_hash=settings_hash(summary))[TIDY_COLUMNS]


def read_tidy_csv(path: Path) -> pd.DataFrame:
    """A committed tidy CSV; config_hash read as text (a hash may be all digits, and rows without one are NaN)."""
    return pd.read_csv(path, dtype={"config_hash": str})


def sort_tidy(tidy: pd.DataFrame) -> pd.DataFrame:
    """Canonical row order and dtypes, so that equal results always give byte-identical CSVs."""
    tidy = tidy[TIDY_COLUMNS].astype({"p": float, "seed": int, "round": int})
    return tidy.sort_values(RUN_KEY + ["round"], kind="stable").reset_index(drop=True)


def _check_unique_runs(tidy: pd.DataFrame, where: str) -> None:
    clashes = tidy[tidy.duplicated(RUN_KEY + ["round"], keep=False)].drop_duplicates(RUN_COLUMNS)
    if len(clashes):
        raise ValueError(f"{where}: several runs share experiment/env/method_tag/protocol/seed:\n{clashes.to_string()}")


def check_one_setting(tidy: pd.DataFrame, run_key: list[str], compared: list[str], where: str) -> None:
    """The runs of one `compared` group (an experiment's env: its arms and seeds) are compared with each
    other, so they must have been made with the same settings: one config_hash (rows without one are not
    known to differ)."""
    runs = tidy.drop_duplicates(run_key).dropna(subset=["config_hash"])
    for group, of_group in runs.groupby(compared):
        counts = of_group.groupby("config_hash")["seed"].size()
        if len(counts) > 1:
            odd = of_group[of_group["config_hash"] == counts.idxmin()]
            raise RunDirError(
                f"{where}: the runs of {'/'.join(map(str, group))} were made with different settings (runs per "
                f"config_hash: {', '.join(f'{h} {n}' for h, n in counts.items())}), e.g. "
                f"{', '.join(f'{r.method_tag} seed {r.seed}' for r in odd.itertuples())}; rerun those with the "
                f"others' command (paper_figures/MISSING.md) or move them to another experiment_name")


def merge_fresh_runs(path: Path, fresh: pd.DataFrame, run_key: list[str], compared: list[str],
                     runs_root: str | Path) -> pd.DataFrame:
    """The rows of the CSV at `path` (if any) with each run of `fresh` replacing the run of its key.
    Refuses (RunDirError) a fresh run made with other settings than the committed run it would replace,
    and a result that mixes settings within a `compared` group (`check_one_setting`)."""
    if path.exists():
        committed = read_tidy_csv(path)
        pairs = committed.drop_duplicates(run_key).merge(fresh.drop_duplicates(run_key), on=run_key,
                                                          suffixes=("_committed", ""))
        clash = pairs[pairs["config_hash_committed"].notna() & (pairs["config_hash_committed"] != pairs["config_hash"])]
        if len(clash):
            run = next(clash.itertuples())
            raise RunDirError(
                f"{runs_root}: {'/'.join(str(getattr(run, key)) for key in run_key)} has config_hash "
                f"{run.config_hash} but the run committed in {path} has {run.config_hash_committed}; rerun it with "
                f"the committed run's command (paper_figures/MISSING.md) or delete that run's rows from {path}")
        replaced = committed.set_index(run_key).index.isin(fresh.set_index(run_key).index)
        fresh = pd.concat([committed[~replaced], fresh], ignore_index=True)
    check_one_setting(fresh, run_key, compared, f"{runs_root} with {path}")
    return fresh


def tidy_from_runs(runs_root: str | Path) -> pd.DataFrame:
    """One row per (finished control run, round) under `runs_root`, columns TIDY_COLUMNS.

    Runs without DONE are skipped and logged; `scan_runs` lists them.
    """
    scan = scan_runs(runs_root)
    for run_dir in scan.unfinished:
        log.warning("skipping unfinished run (no DONE): %s", run_dir)
    finished = [run_dir for run_dir in scan.finished if run_agent(run_dir) == "control"]
    if not finished:
        return pd.DataFrame(columns=TIDY_COLUMNS)
    tidy = sort_tidy(pd.concat([_read_run(d) for d in finished], ignore_index=True))
    _check_unique_runs(tidy, str(runs_root))
    return tidy


def load_tidy(data_dir: str | Path) -> pd.DataFrame:
    """All tidy CSVs of `data_dir` (one per experiment) as one table."""
    paths = sorted(Path(data_dir).glob("*.csv"))
    if not paths:
        return pd.DataFrame(columns=TIDY_COLUMNS)
    tidy = sort_tidy(pd.concat([read_tidy_csv(p) for p in paths], ignore_index=True))
    _check_unique_runs(tidy, str(data_dir))
    check_one_setting(tidy, RUN_KEY, COMPARED, str(data_dir))
    return tidy


def refresh_tidy_csvs(runs_root: str | Path, data_dir: str | Path, experiments: set[str]) -> list[Path]:
    """Write the finished runs of `runs_root` of the given `experiments` (those some figure reads) into
    `data_dir/<experiment>.csv`; returns those paths. Runs of other experiments (e.g. a quick look
    under experiment_name=default) are logged and left out of the committed data.

    A run found on disk replaces that run's rows in the CSV; runs of the CSV that are not on disk
    are kept, so refreshing from a partial runs folder never loses committed results. Nothing is
    written when a run on disk was made with other settings than the committed run it would replace,
    or than the other runs of its env (RunDirError).
    """
    fresh = tidy_from_runs(runs_root)
    for experiment in sorted(set(fresh["experiment"]) - experiments):
        log.warning("not adding the runs of experiment %r to %s: no figure or table reads it", experiment, data_dir)
    fresh = fresh[fresh["experiment"].isin(experiments)]
    data_dir = Path(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    merged = {}
    for experiment, rows in fresh.groupby("experiment", sort=True):
        path = data_dir / f"{experiment}.csv"
        merged[path] = sort_tidy(merge_fresh_runs(path, rows, RUN_KEY, COMPARED, runs_root))
    for path, rows in merged.items():  # only once every experiment has passed the checks
        rows.to_csv(path, index=False, float_format=CSV_FLOAT_FORMAT)
    return list(merged)
