"""Run directories → the tidy results table, and the tidy CSVs committed under paper_figures/data/.

A run directory (written by the training loop) holds `metrics.csv` (one row per round),
`summary.json` (what the run is) and, once it has finished, an empty `DONE` marker. Only finished
runs enter the tidy table: a figure must never be drawn from a run that stopped half-way.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from rlinfluence.figures.committed import (
    REPLACE_KEY,
    SETTINGS,
    Refresh,
    describe_difference,
    load_settings,
    run_settings,
)
from rlinfluence.run.checkpoint import DONE, RunDirError, write_bytes, write_json
from rlinfluence.run.identity import IDENTITY
from rlinfluence.run.provenance import HARDWARE_COLUMNS, PROVENANCE_COLUMNS, tidy_provenance

log = logging.getLogger(__name__)

# config_hash is the run dir's hash of its non-default settings (run/identity.py), DEFAULT_SETTINGS when there
# are none; empty for rows committed before the tidy CSVs carried it (their run dirs are gone).
RUN_COLUMNS = ["experiment", "env", "method", "method_tag", "p", "optimizer", "protocol", "config_hash", "seed"]
DEFAULT_SETTINGS = "default"
ROUND_COLUMNS = [
    "round",
    "env_steps",
    "test_return",
    "n_records",
    "n_kept",
    "time_collect",
    "time_influence",
    "time_update",
    "time_eval",
]
# Last, so that rows committed before they existed (read with the columns empty) keep their bytes; a CSV has
# the hardware columns only once one of its rows has a value there (tidy_csv_bytes).
TIDY_COLUMNS = RUN_COLUMNS + ROUND_COLUMNS + PROVENANCE_COLUMNS + HARDWARE_COLUMNS
# One run = one curve; a second run with the same key would be ambiguous in every figure.
# One run of the tidy rows (its run dir's parts, the config hash aside): an env's runs under two optimizers are two
# blocks (the twenty-seed study's MiniGrid under SGD and under Adam share their run names).
RUN_KEY = ["experiment", "env", "optimizer", "method_tag", "protocol", "seed"]
COMPARED = ["experiment", "env"]  # the runs one figure compares with each other: every arm and seed of an env
RUN_DIR = "run_dir"  # a fresh row's run dir: named by the refusals, never written
SB3_EXPERIMENT = "sb3"  # paper_figures/data/sb3.csv (benchmarks/sb3_iif_study.py)
# Experiments whose protocols are declared variants with settings of their own (stock SB3 with and without gradient
# clipping): their runs are compared within a protocol, so each variant must share one config_hash.
VARIANT_EXPERIMENTS = (SB3_EXPERIMENT,)
# Experiments committed one CSV per env and arm (`<experiment>.<env>.<method_tag>.csv`): a study whose arms land one
# block of seeds at a time, so that a block's commit touches its arm's file alone, and no file grows with the study
# (a LunarLander arm's twenty seeds are ~1 MB; its seven arms in one file were ~10).
ONE_CSV_PER_ARM = ("twenty_seeds",)


def tidy_csv_name(experiment: str, env: str, method_tag: str) -> str:
    """The committed tidy CSV that holds an experiment's rows of `env`'s arm `method_tag`."""
    return f"{experiment}.{env}.{method_tag}.csv" if experiment in ONE_CSV_PER_ARM else f"{experiment}.csv"


def experiment_csvs(data_dir: Path, experiment: str) -> list[Path]:
    """The committed tidy CSVs that hold `experiment`'s rows, named by `tidy_csv_name` or by an earlier naming
    (`<experiment>.csv`, or one CSV per env: `<experiment>.<env>.csv`)."""
    return sorted({*data_dir.glob(f"{experiment}.csv"), *data_dir.glob(f"{experiment}.*.csv")})


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
    """The agent that made a run (run/agents.py; language-model runs have their own tidy CSV, figures/rlhf.py).
    Identities from before env.agent existed lack the key: those runs are control runs."""
    path = run_dir / IDENTITY
    settings = json.loads(path.read_text())["settings"] if path.exists() else {}
    return settings.get("env.agent", "control")


def settings_hash(summary: dict) -> str:
    """A run's config_hash as the tidy rows store it (a run of default settings has none in summary.json)."""
    return summary.get("config_hash") or DEFAULT_SETTINGS


def _summary(run_dir: Path) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


def _read_run(run_dir: Path) -> pd.DataFrame:
    summary = _summary(run_dir)
    run = {key: summary[key] for key in RUN_COLUMNS if key != "config_hash"}
    rounds = pd.read_csv(run_dir / "metrics.csv", usecols=ROUND_COLUMNS)
    return rounds.assign(
        **run,
        config_hash=settings_hash(summary),
        run_dir=str(run_dir),
        **tidy_provenance(summary.get("provenance", [])),
    )[TIDY_COLUMNS + [RUN_DIR]]


def read_tidy_csv(path: Path) -> pd.DataFrame:
    """A committed tidy CSV; config_hash, provenance and hardware read as text (a hash may be all digits, and
    rows without one are NaN); the provenance and hardware columns empty where the CSV predates them."""
    recorded = PROVENANCE_COLUMNS + HARDWARE_COLUMNS
    tidy = pd.read_csv(path, dtype=dict.fromkeys(["config_hash", *recorded], str))
    empty = {
        column: pd.Series(None, index=tidy.index, dtype=str)  # as read_csv reads an empty column
        for column in recorded
        if column not in tidy
    }
    return tidy.assign(**empty)


def read_experiment(data_dir: Path, experiment: str) -> pd.DataFrame:
    """The committed tidy rows of `experiment`, from all of its CSVs (`experiment_csvs`), in file order."""
    held = experiment_csvs(data_dir, experiment)
    if not held:
        raise FileNotFoundError(f"{data_dir} has no tidy CSV of experiment {experiment!r}")
    return pd.concat([read_tidy_csv(path) for path in held], ignore_index=True)


def _round_trip(value: object) -> object:
    """A float as the shortest text that reads back to the same float (test returns are compared bit for
    bit by task=replay), without a trailing `.0`; NaN as an empty field."""
    if not isinstance(value, float):
        return value
    return "" if value != value else repr(value).removesuffix(".0")


def tidy_csv_bytes(tidy: pd.DataFrame) -> bytes:
    """A tidy CSV's bytes: every float at full round-trip precision; the hardware columns only where a row
    has a value in them (unknown hardware, the committed rows made before runs recorded it, is no column)."""
    unknown = [column for column in HARDWARE_COLUMNS if column in tidy and tidy[column].isna().all()]
    return tidy.drop(columns=unknown).astype(object).map(_round_trip).to_csv(index=False).encode()


def sort_tidy(tidy: pd.DataFrame, columns: list[str] = TIDY_COLUMNS) -> pd.DataFrame:
    """Canonical row order and dtypes, so that equal results always give byte-identical CSVs."""
    tidy = tidy[columns].astype({"p": float, "seed": int, "round": int})
    return tidy.sort_values(RUN_KEY + ["round"], kind="stable").reset_index(drop=True)


def _check_unique_runs(tidy: pd.DataFrame, where: str) -> None:
    """One run per RUN_KEY. The refusal is one line: the first clash, by its run dirs (committed rows: config_hash)."""
    clashes = tidy[tidy.duplicated(RUN_KEY + ["round"], keep=False)]
    if len(clashes):
        key = clashes[RUN_KEY].iloc[0]
        runs = clashes[(clashes[RUN_KEY] == key).all(axis=1)]
        which = (runs[RUN_DIR] if RUN_DIR in runs else "config_hash " + runs["config_hash"].astype(str)).unique()
        if len(which) == 1 and RUN_DIR in runs:
            raise RunDirError(f"{where}: {repeated_rounds(Path(which[0]))}")
        raise RunDirError(
            f"{where}: several runs share {'/'.join(RUN_KEY)} "
            f"{'/'.join(map(str, key))} ({', '.join(which)}); a figure draws one run per seed: keep one"
        )


def repeated_rounds(run_dir: Path) -> str:
    """What is wrong with a run whose metrics.csv holds a round more than once (two processes wrote it at once,
    before a run dir had one writer): the rounds, by the file's line numbers, and the way out."""
    rounds = pd.read_csv(run_dir / "metrics.csv", usecols=["round"])["round"]
    lines = {k: [i + 2 for i in rows] for k, rows in rounds.groupby(rounds).groups.items() if len(rows) > 1}
    shown = "; ".join(f"round {k} on lines {', '.join(map(str, at))}" for k, at in list(lines.items())[:3])
    more = f" and {len(lines) - 3} more round(s)" if len(lines) > 3 else ""
    return (
        f"{run_dir}/metrics.csv has {len(lines)} round(s) more than once ({shown}{more}): two processes trained "
        "this run dir at once; retrain it with force=true"
    )


def group_name(values) -> str:
    """A `compared` group as figures.replace names it: `main/frozenlake`."""
    return "/".join(map(str, values if isinstance(values, tuple) else (values,)))


def group_names(fresh: pd.DataFrame, compared: list[str]) -> set[str]:
    return {group_name(group) for group, _ in fresh.groupby(compared)}


def check_one_setting(
    tidy: pd.DataFrame, run_key: list[str], compared: list[str], where: str, remedy: str | None = None
) -> None:
    """The runs of one `compared` group (an experiment's env: its arms and seeds) are compared with each
    other, so they must have been made with the same settings: one config_hash (rows without one are not
    known to differ). `remedy` ends the refusal; by default, the ways out for the committed data."""
    runs = tidy.drop_duplicates(run_key).dropna(subset=["config_hash"])
    for group, of_group in runs.groupby(compared):
        counts = of_group.groupby("config_hash")["seed"].size()
        if len(counts) > 1:
            odd = of_group[of_group["config_hash"] == counts.idxmin()]
            raise RunDirError(
                f"{where}: the runs of {group_name(group)} were made with different settings (runs per "
                f"config_hash: {', '.join(f'{h} {n}' for h, n in counts.items())}), e.g. "
                f"{', '.join(f'{r.method_tag} seed {r.seed}' for r in odd.itertuples())}; "
                + (
                    remedy
                    or (
                        f"rerun those with the others' command (paper_figures/MISSING.md), move them to another "
                        f"experiment_name, or replace the committed ones with {REPLACE_KEY}=[{group_name(group)}]"
                    )
                )
            )


def _fresh_settings(fresh: pd.DataFrame) -> dict[str, dict]:
    """config_hash → non-default settings of the fresh runs that have an identity.json."""
    identities = (run_settings(Path(run_dir)) for run_dir in fresh[RUN_DIR].unique())
    return {
        digest: identity["non_default"]
        for identity in identities
        if identity is not None
        for digest in [settings_hash({"config_hash": identity["config_hash"]})]
    }


def merge_fresh_runs(
    path: Path,
    committed: pd.DataFrame | None,
    fresh: pd.DataFrame,
    run_key: list[str],
    compared: list[str],
    runs_root: str | Path,
    data_dir: Path,
    replace: set[str],
) -> tuple[pd.DataFrame, Refresh]:
    """The `committed` rows (those of the CSV or CSVs at `path`; None when there are none) with each run of
    `fresh` replacing the run of its key, and what writing them adds to the committed data.

    Refuses (RunDirError), naming the run and the first setting that differs, a fresh run made with other
    settings than the committed run it would replace, unless its group (`<experiment>/<env>`) is in
    `replace`: then the group's committed runs made with other settings than the fresh ones give way to
    them. Refuses too a result that mixes settings within a `compared` group (`check_one_setting`)."""
    check_one_setting(fresh, run_key, compared, str(runs_root))
    refresh = Refresh(data_dir, settings=_fresh_settings(fresh))
    committed = fresh.iloc[:0].drop(columns=RUN_DIR) if committed is None else committed
    fresh_hash = fresh.drop_duplicates(compared).set_index(compared)["config_hash"]  # one per group (checked)
    groups = committed.set_index(compared).index
    expected = fresh_hash.reindex(groups).to_numpy()  # NaN where the group has no fresh run
    other = (
        groups.map(group_name).isin(replace)
        & committed["config_hash"].notna().to_numpy()
        & pd.notna(expected)
        & (committed["config_hash"].to_numpy() != expected)
    )
    for group, gone in committed[other].groupby(compared):
        fresh_of = fresh[fresh.set_index(compared).index == group]
        refresh.replaced.append(
            f"{path}: {len(gone.drop_duplicates(run_key))} committed run(s) of {group_name(group)} (config_hash "
            f"{'/'.join(gone['config_hash'].unique())}) replaced by {len(fresh_of.drop_duplicates(run_key))} "
            f"run(s) of {runs_root} (config_hash {fresh_of['config_hash'].iloc[0]})"
        )
    committed = committed[~other]
    pairs = committed.drop_duplicates(run_key).merge(
        fresh.drop_duplicates(run_key), on=run_key, suffixes=("_committed", "")
    )
    clash = pairs[pairs["config_hash_committed"].notna() & (pairs["config_hash_committed"] != pairs["config_hash"])]
    if len(clash):
        run = next(clash.itertuples())
        difference = describe_difference(
            data_dir, run.config_hash_committed, run.config_hash, run_settings(Path(run.run_dir))
        )
        group = group_name(tuple(getattr(run, key) for key in compared))
        raise RunDirError(
            f"{run.run_dir} would replace {'/'.join(str(getattr(run, key)) for key in run_key)} of {path}, made "
            f"with {difference}; rerun it with the committed run's command (paper_figures/MISSING.md), or "
            f"replace the committed runs of {group} with {REPLACE_KEY}=[{group}]"
        )
    replaced = committed.set_index(run_key).index.isin(fresh.set_index(run_key).index)
    merged = pd.concat([committed[~replaced], fresh.drop(columns=RUN_DIR)], ignore_index=True)
    check_one_setting(merged, run_key, compared, f"{runs_root} with {path}")
    return merged, refresh


def _control_runs(run_dirs: list[Path]) -> list[Path]:
    return [run_dir for run_dir in run_dirs if run_agent(run_dir) == "control"]


def run_experiments(runs_root: str | Path) -> list[str]:
    """The experiments of the finished control runs under `runs_root`, sorted."""
    return sorted({_summary(run_dir)["experiment"] for run_dir in _control_runs(scan_runs(runs_root).finished)})


def tidy_from_runs(runs_root: str | Path, experiments: Collection[str] | None = None) -> pd.DataFrame:
    """One row per (finished control run, round) under `runs_root`, columns TIDY_COLUMNS and RUN_DIR;
    with `experiments`, those experiments' only (the runs of others are neither read nor checked).

    Runs without DONE are skipped and logged; `scan_runs` lists them.
    """
    scan = scan_runs(runs_root)
    for run_dir in scan.unfinished:
        log.warning("skipping unfinished run (no DONE): %s", run_dir)
    finished = [
        run_dir
        for run_dir in _control_runs(scan.finished)
        if experiments is None or _summary(run_dir)["experiment"] in experiments
    ]
    if not finished:
        return pd.DataFrame(columns=TIDY_COLUMNS + [RUN_DIR])
    tidy = sort_tidy(pd.concat([_read_run(d) for d in finished], ignore_index=True), TIDY_COLUMNS + [RUN_DIR])
    _check_unique_runs(tidy, str(runs_root))
    return tidy


def load_tidy(data_dir: str | Path) -> pd.DataFrame:
    """All tidy CSVs of `data_dir` (one per experiment, or per experiment, env and arm: `tidy_csv_name`) as one
    table."""
    paths = sorted(Path(data_dir).glob("*.csv"))
    if not paths:
        return pd.DataFrame(columns=TIDY_COLUMNS)
    tidy = sort_tidy(pd.concat([read_tidy_csv(p) for p in paths], ignore_index=True))
    _check_unique_runs(tidy, str(data_dir))
    variants = tidy["experiment"].isin(VARIANT_EXPERIMENTS)
    check_one_setting(tidy[~variants], RUN_KEY, COMPARED, str(data_dir))
    check_one_setting(tidy[variants], RUN_KEY, COMPARED + ["protocol"], str(data_dir))
    return tidy


def fresh_runs(runs_root: str | Path, experiments: set[str]) -> pd.DataFrame:
    """The tidy rows of the finished control runs under `runs_root` of the given `experiments` (those some
    figure reads). Runs of other experiments (e.g. a quick look under experiment_name=default) are logged
    and left out of the committed data, unread: two of them sharing a run key block nothing."""
    for experiment in sorted(set(run_experiments(runs_root)) - experiments):
        log.warning(
            "not adding the runs of experiment %r to the committed data: no figure or table reads it", experiment
        )
    return tidy_from_runs(runs_root, experiments)


def tidy_csv_writes(fresh: pd.DataFrame, runs_root: str | Path, data_dir: Path, replace: set[str]) -> Refresh:
    """`fresh` (`fresh_runs`) merged into each of its experiments' committed rows (`merge_fresh_runs`) and
    written back one CSV per `tidy_csv_name`; nothing is written (`Refresh.write` does).

    A run found on disk replaces that run's rows; runs committed but not on disk are kept, so refreshing
    from a partial runs folder never loses committed results. An experiment's rows are read from all of
    its CSVs (`experiment_csvs`) and written back under the current naming: when the naming changes, the next
    refresh moves the rows, and removes the files it leaves empty.
    """
    refresh = Refresh(data_dir)
    for experiment, rows in fresh.groupby("experiment", sort=True):
        held = experiment_csvs(data_dir, experiment)
        committed = read_experiment(data_dir, experiment) if held else None
        where = data_dir / (held[0].name if len(held) == 1 else f"{experiment}.*.csv")
        merged, of_experiment = merge_fresh_runs(
            where, committed, rows, RUN_KEY, COMPARED, runs_root, data_dir, replace
        )
        names = [tidy_csv_name(*run) for run in zip(merged["experiment"], merged["env"], merged["method_tag"])]
        for name, of_name in merged.groupby(pd.Series(names, index=merged.index, dtype=str), sort=True):
            of_experiment.files[data_dir / name] = tidy_csv_bytes(sort_tidy(of_name))
        of_experiment.removed = [path for path in held if path not in of_experiment.files]
        refresh.merge(of_experiment)
    return refresh


def single_csv_writes(
    fresh: pd.DataFrame,
    path: Path,
    columns: list[str],
    run_key: list[str],
    compared: list[str],
    runs_root: str | Path,
    data_dir: Path,
    replace: set[str],
) -> Refresh:
    """`fresh` merged into the one CSV at `path` (`merge_fresh_runs`: the language-model runs', the planted
    runs' detection rows), its `columns` (not read_tidy_csv's provenance where the CSV has none), sorted by
    run and round; nothing is written (`Refresh.write` does)."""
    if fresh.empty:
        return Refresh(data_dir)
    committed = read_tidy_csv(path) if path.exists() else None
    merged, refresh = merge_fresh_runs(path, committed, fresh, run_key, compared, runs_root, data_dir, replace)
    refresh.files[path] = tidy_csv_bytes(merged[columns].sort_values(run_key + ["round"], kind="stable"))
    return refresh


# One run of a CSV that holds a single experiment: the protocol tells a study's declared variants apart
# (sb3.csv: stock SB3 with and without gradient clipping).
EXTERNAL_RUN_KEY = ["env", "method_tag", "protocol", "seed"]


def commit_external_runs(
    fresh: pd.DataFrame, csv_path: Path, settings: dict[str, dict[str, Any]], extra_columns: list[str]
) -> pd.DataFrame:
    """Rows that code other than our training loop made (benchmarks/authors_pipeline/convert.py,
    benchmarks/sb3_iif_study.py) merged into their tidy CSV: a fresh run replaces the committed run of
    the same env, arm, protocol and seed, every other committed run stays. `settings` (config_hash -> what made the
    rows) join settings.json, as every committed hash names its settings. Writes both; returns the rows."""
    if csv_path.exists():
        committed = read_tidy_csv(csv_path)
        key = committed.set_index(EXTERNAL_RUN_KEY).index
        fresh = pd.concat([committed[~key.isin(fresh.set_index(EXTERNAL_RUN_KEY).index)], fresh], ignore_index=True)
    rows = fresh.reindex(columns=TIDY_COLUMNS + extra_columns)
    rows = rows.sort_values(["env", "method_tag", "seed", "round"], kind="stable").reset_index(drop=True)
    known = load_settings(csv_path.parent) | settings
    write_json(csv_path.parent / SETTINGS, dict(sorted(known.items())))
    write_bytes(csv_path, tidy_csv_bytes(rows))
    return rows
