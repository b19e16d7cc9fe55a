"""Committed results are never silently replaced (issue 32): a refresh from runs or analyses made with other
settings is refused in one line, exit 2, with nothing written; replacing on purpose names what it replaces;
analyses live with their run, and a figure draws only the analysis its command makes."""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import rlinfluence as rlinfluence_package
from conftest import cli_refusal
from rlinfluence.choices import ConfigError
from rlinfluence.config.paths import REPO_ROOT
from rlinfluence.figures.analysis_data import documented_identities
from rlinfluence.figures.catalogue import OUTPUTS
from rlinfluence.figures.committed import SETTINGS, load_settings
from rlinfluence.figures.gather import read_identity
from rlinfluence.figures.regenerate import refresh_from_runs, regenerate
from rlinfluence.figures.requirements import FigureData
from rlinfluence.figures.runs import (
    RUN_KEY,
    load_tidy,
    read_experiment,
    read_tidy_csv,
    sort_tidy,
    tidy_csv_bytes,
    tidy_csv_writes,
)
from rlinfluence.run.provenance import HARDWARE_COLUMNS, PROVENANCE_COLUMNS

COMMITTED = REPO_ROOT / "paper_figures"
PROBE = ["experiment_name=main", "env=frozenlake", "env.rounds=2", "eval.episodes=10", "seed=0", "method=iif"]


def rlinfluence(*overrides: str, cwd: Path) -> subprocess.CompletedProcess:
    """The CLI of the package under test, wherever `cwd` is."""
    env = {**os.environ, "PYTHONPATH": str(Path(rlinfluence_package.__file__).parents[1])}
    return subprocess.run(
        [sys.executable, "-m", "rlinfluence", *overrides], capture_output=True, text=True, timeout=600, cwd=cwd, env=env
    )


def fingerprint(directory: Path) -> dict[str, str]:
    return {
        str(path.relative_to(directory)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


@pytest.fixture(scope="module")
def probe_runs(tmp_path_factory) -> Path:
    """The probe's 2-round `experiment_name=main` FrozenLake run (IIF, seed 0)."""
    root = tmp_path_factory.mktemp("runs")
    result = rlinfluence(*PROBE, f"runs_root={root}", "logger=disabled", "progress=false", cwd=root)
    assert result.returncode == 0, result.stderr
    return root


@pytest.fixture
def data_copy(tmp_path) -> Path:
    shutil.copytree(COMMITTED / "data", tmp_path / "data")
    return tmp_path / "data"


def test_every_committed_control_row_carries_a_config_hash_whose_settings_are_known():
    settings = load_settings(COMMITTED / "data")
    for path in sorted((COMMITTED / "data").glob("*.csv")):
        hashes = read_tidy_csv(path)["config_hash"]
        assert hashes.notna().all(), path
        assert set(hashes) <= set(settings), path


def test_every_committed_analysis_carries_the_identity_of_the_command_its_figure_documents():
    documented = documented_identities(COMMITTED / "data", OUTPUTS)
    assert sorted(documented) == sorted(
        path for path in (COMMITTED / "data" / "analyses").glob("*/*") if path.suffix in (".csv", ".npz")
    )
    for path, identity in documented.items():
        assert read_identity(path) == identity, path


def test_a_refresh_from_runs_with_other_settings_is_refused_and_writes_nothing(probe_runs, tmp_path):
    """The probe: run from elsewhere, the figure task still reads and would write the repo's paper_figures/."""
    before = fingerprint(COMMITTED)
    result = rlinfluence("task=figures", f"figures.runs_root={probe_runs}", cwd=tmp_path)
    line = cli_refusal(result)
    run_dir = probe_runs / "main" / "frozenlake" / "sgd"
    assert line.startswith(f"rlinfluence: {run_dir}/iif-p50-")
    assert "/seed0 would replace main/frozenlake/sgd/iif-p50/clean/0" in line
    assert "made with env.rounds=50, this has env.rounds=2 (2 setting(s) differ)" in line
    assert "figures.replace=[main/frozenlake]" in line
    assert fingerprint(COMMITTED) == before and not list(tmp_path.iterdir())


def test_replacing_on_purpose_says_what_it_replaces_and_keeps_every_other_row(probe_runs, data_copy):
    committed = read_tidy_csv(data_copy / "main.csv")
    refresh = refresh_from_runs(probe_runs, data_copy, {"main/frozenlake"})
    [line], [digest] = refresh.replaced, refresh.settings  # the fresh run's hash, and only it, is new
    frozenlake = committed[committed["env"] == "frozenlake"]
    n_runs = len(frozenlake.drop_duplicates(["method_tag", "protocol", "seed"]))
    assert line == (
        f"{data_copy / 'main.csv'}: {n_runs} committed run(s) of main/frozenlake (config_hash default) "
        f"replaced by 1 run(s) of {probe_runs} (config_hash {digest})"
    )
    refresh.write()
    merged = read_tidy_csv(data_copy / "main.csv")
    others = merged[merged["env"] != "frozenlake"].reset_index(drop=True)
    pd.testing.assert_frame_equal(others, committed[committed["env"] != "frozenlake"].reset_index(drop=True))
    fresh = merged[merged["env"] == "frozenlake"]
    assert list(fresh["round"]) == [0, 1, 2] and fresh["method_tag"].unique().tolist() == ["iif-p50"]
    assert fresh["config_hash"].unique().tolist() == [digest]
    assert load_settings(data_copy)[digest] == {"env.rounds": 2, "eval.episodes": 10}


def test_a_replace_naming_nothing_to_refresh_is_refused(probe_runs, data_copy, tmp_path):
    before = fingerprint(data_copy)
    with pytest.raises(
        ConfigError, match=r"figures.replace=main/frozenlak names nothing .* \(there: main/frozenlake\)"
    ):
        regenerate(data_copy, tmp_path / "out", probe_runs, {"main/frozenlak"})
    with pytest.raises(
        ConfigError, match="figures.replace=main/frozenlake replaces .* figures.runs_root, which is not set"
    ):
        regenerate(data_copy, tmp_path / "out", None, {"main/frozenlake"})
    assert fingerprint(data_copy) == before and (data_copy / SETTINGS).exists() and not (tmp_path / "out").exists()


# ----------------------------------------------------------------------------- analyses are runs too

TIMELINE = [
    "task=timeline",
    "env=acrobot",
    "seed=0",
    "env.rounds=3",
    "env.n_steps=128",
    "eval.episodes=2",
    "analysis.timeline.top=5",
    "analysis.timeline.neighbours=5",
    "analysis.timeline.phases=1",
]
FIG10 = COMMITTED / "data" / "analyses" / "timeline" / "acrobot-seed0.csv"


@pytest.fixture(scope="module")
def timeline_runs(tmp_path_factory) -> Path:
    """A 3-round task=timeline run from the repo root: its output lives with its run, not in paper_figures/."""
    root = tmp_path_factory.mktemp("timeline")
    before = fingerprint(COMMITTED)
    result = rlinfluence(*TIMELINE, f"runs_root={root}", "logger=disabled", "progress=false", cwd=REPO_ROOT)
    assert result.returncode == 0, result.stderr
    assert fingerprint(COMMITTED) == before
    return root


def test_a_timeline_run_from_the_repo_root_leaves_the_committed_fig10_data_untouched(timeline_runs):
    [output] = timeline_runs.rglob("analyses/timeline-*.csv")
    assert output.parent.parent.name == "seed0" and output.with_suffix(".json").exists()
    before = fingerprint(COMMITTED)
    result = rlinfluence("task=figures", f"figures.runs_root={timeline_runs}", cwd=REPO_ROOT)
    line = cli_refusal(result)
    assert line.startswith(
        f"rlinfluence: {output} would replace {FIG10}, made with analysis.timeline.neighbours=20, "
        f"this has analysis.timeline.neighbours=5 (6 setting(s) differ)"
    )  # the 6 of TIMELINE
    assert line.endswith("figures.replace=[analyses/timeline/acrobot]")
    assert fingerprint(COMMITTED) == before


def test_a_figure_never_draws_from_an_analysis_made_with_other_settings(timeline_runs, data_copy):
    fig10 = next(output for output in OUTPUTS if output.name == "fig10_timeline_acrobot").runs
    data = FigureData(pd.DataFrame(), data_copy)
    assert fig10.shortfalls(data) == {}  # the committed analysis is the one Fig. 10 documents
    refresh = refresh_from_runs(timeline_runs, data_copy, {"analyses/timeline/acrobot"})
    [line] = refresh.replaced
    assert line.startswith(f"{data_copy / 'analyses' / 'timeline' / 'acrobot-seed0.csv'} (config_hash ")
    refresh.write()
    [shortfall] = fig10.shortfalls(data).values()
    assert shortfall.startswith(
        "analyses/timeline/acrobot: needs 1 seeds, has 0; not drawn, made with other settings "
        "than its command: acrobot-seed0.csv: analysis.timeline.neighbours=5, this has "
        "analysis.timeline.neighbours=20 ("
    )


# ----------------------------------------------------------------------------- issue 43: provenance backfilled

BACKFILLED = ["adam", "adam_preconditioner", "heuristics_advantage", "heuristics_td_error", "main", "p_ablation"]


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, check=True).stdout


def as_text(csv_text: str) -> pd.DataFrame:
    return pd.read_csv(io.StringIO(csv_text), dtype=str, keep_default_na=False)


@pytest.mark.parametrize("name", BACKFILLED)
def test_the_commit_that_added_the_provenance_columns_changed_no_value(name):
    path = f"paper_figures/data/{name}.csv"
    if shutil.which("git") is None or not (REPO_ROOT / ".git").exists():
        pytest.skip("not a git checkout: the commit that added the columns cannot be read")
    added = git("log", "--format=%H", "-S", "code_commit", "--", path).split()
    if not added:
        pytest.skip("a shallow clone: the commit that added the columns is not in it")
    before, after = (as_text(git("show", f"{commit}:{path}")) for commit in (f"{added[-1]}^", added[-1]))
    assert "code_commit" not in before and list(after) == list(before) + PROVENANCE_COLUMNS
    merged = before.merge(after, on=RUN_KEY + ["round"], how="outer", suffixes=("_before", ""), indicator=True)
    assert (merged["_merge"] == "both").all() and len(merged) == len(before) == len(after)
    for column in set(before) - set(RUN_KEY + ["round"]):
        assert (merged[f"{column}_before"] == merged[column]).all(), column
    assert (merged[PROVENANCE_COLUMNS] == "").all().all()  # unknown: blank


def test_a_refresh_that_replaces_one_run_rewrites_only_that_runs_lines(tmp_path):
    """A rerun of one committed run with its settings (other timings, and the provenance a run now records),
    as tidy_from_runs reads it, merged into main.csv: only its own lines change."""
    path = COMMITTED / "data" / "main.csv"
    committed = read_tidy_csv(path)
    run = committed[(committed[RUN_KEY] == committed[RUN_KEY].iloc[0]).all(axis=1)]
    rerun = run.assign(
        time_update=run["time_update"] * 2,
        code_commit="0" * 40,
        code_dirty="False",
        versions="torch==2.13.0+cpu",
        run_dir=str(tmp_path / "rerun"),
    )
    written = tidy_csv_writes(rerun, tmp_path, COMMITTED / "data", set()).files[path].decode().splitlines()
    lines = path.read_text().splitlines()
    changed = [i for i, (was, now) in enumerate(zip(lines, written)) if was != now]
    assert len(written) == len(lines) and len(changed) == len(run) == 51
    assert all(
        written[i].endswith(",0000000000000000000000000000000000000000,False,torch==2.13.0+cpu") for i in changed
    )


def test_a_refresh_moves_a_study_csv_named_the_earlier_way_into_one_csv_per_arm(tmp_path):
    """The twenty-seed study's rows were once one CSV per env (twenty_seeds.frozenlake.csv). The next refresh of the
    study writes them back one CSV per env and arm and removes the old file: every row read back is the row that
    was committed, but for the rerun's own."""
    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(COMMITTED / "data" / SETTINGS, data)
    committed = read_experiment(COMMITTED / "data", "twenty_seeds")
    frozenlake = sort_tidy(committed[committed["env"] == "frozenlake"])
    (data / "twenty_seeds.frozenlake.csv").write_bytes(tidy_csv_bytes(frozenlake))
    run = frozenlake[(frozenlake[RUN_KEY] == frozenlake[RUN_KEY].iloc[0]).all(axis=1)]
    rerun = run.assign(time_update=run["time_update"] * 2, run_dir=str(tmp_path / "rerun"))
    written = tidy_csv_writes(rerun, tmp_path, data, set()).write()
    arms = sorted(frozenlake["method_tag"].unique())
    assert sorted(path.name for path in written) == [f"twenty_seeds.frozenlake.{arm}.csv" for arm in arms]
    assert sorted(path.name for path in data.glob("*.csv")) == sorted(path.name for path in written)
    expected = frozenlake.copy()
    expected.loc[run.index, "time_update"] = rerun["time_update"]
    pd.testing.assert_frame_equal(load_tidy(data), expected)


def test_the_first_run_that_records_its_hardware_adds_the_columns_and_leaves_every_other_value(tmp_path):
    """Issue 56: the committed rows, made before runs recorded their hardware, have no hardware columns; a rerun
    that records it adds them, empty (unknown) on every other run's line, whose values stay as they were."""
    path = COMMITTED / "data" / "main.csv"
    committed = read_tidy_csv(path)
    run = committed[(committed[RUN_KEY] == committed[RUN_KEY].iloc[0]).all(axis=1)]
    hardware = {
        "cpu": "AMD EPYC (family 26, model 2)",
        "kernels": "pinned: ATen DEFAULT",
        "threads": "1",
        "device": "cpu",
    }
    rerun = run.assign(**hardware, run_dir=str(tmp_path / "rerun"))
    written = tidy_csv_writes(rerun, tmp_path, COMMITTED / "data", set()).files[path].decode().splitlines()
    lines = path.read_text().splitlines()
    assert written[0] == lines[0] + "," + ",".join(HARDWARE_COLUMNS)
    others = [i for i in range(1, len(written)) if not written[i].endswith(",cpu")]  # the rerun's lines end so
    assert len(others) == len(lines) - len(run) - 1
    assert all(written[i] == lines[i] + ",,,," for i in others)
