"""The engine equivalence outputs (figures/engines.py): engine=stacked's FrozenLake seeds, gathered from their run dirs
into their own tidy CSV, against the main comparison's committed seeds of today's engine."""

from __future__ import annotations

import filecmp

import pandas as pd
import pytest
from scipy import stats

from rlinfluence.figures import engines
from rlinfluence.figures.regenerate import regenerate
from rlinfluence.figures.runs import read_tidy_csv
from test_figures import table, write_run

STACKED_HASH = "4739bc"  # the hash of engine=stacked, its runs' one non-default setting
TAGS = ("iif-p50", "ppo")
# write_run's curves: seed s adds 10·s to every round, so IIF's final return is 5 + 10·s, standard PPO's 4 + 10·s, and
# every seed's SE_ave is 33.3 %.
COMMAND = (
    "not run yet (`rlinfluence -m env=frozenlake method=iif,ppo seed='range(20)' engine=stacked "
    "experiment_name=engine_equivalence`)"
)


def write_engine_runs(root, stacked_seeds: int) -> None:
    """The main comparison's 10 committed FrozenLake seeds of each arm, and engine=stacked's first `stacked_seeds`."""
    for tag in TAGS:
        for seed in range(10):
            write_run(root / "runs", "main", "frozenlake", tag, seed)
        for seed in range(stacked_seeds):
            write_run(root / "runs", engines.ENGINE_EXPERIMENT, "frozenlake", tag, seed, config_hash=STACKED_HASH)


def made(root, stacked_seeds: int) -> pd.DataFrame:
    write_engine_runs(root, stacked_seeds)
    results = {name: status for name, status, _ in regenerate(root / "data", root / "out", root / "runs")}
    assert results["engine_equivalence"] == results["engine_equivalence_curves"] == "made"
    return table(root / "out", "engine_equivalence").set_index("Quantity")


@pytest.fixture(scope="module")
def twenty(tmp_path_factory):
    root = tmp_path_factory.mktemp("engines")
    return root, made(root, 20)


def test_the_stacked_seeds_are_gathered_into_their_own_csv_under_their_engines_hash(twenty):
    root, _ = twenty
    stacked = read_tidy_csv(root / "data" / "engine_equivalence.csv")
    assert set(stacked["config_hash"]) == {STACKED_HASH}
    assert stacked.groupby("method_tag")["seed"].nunique().to_dict() == {"iif-p50": 20, "ppo": 20}
    assert set(read_tidy_csv(root / "data" / "main.csv")["config_hash"]) == {"default"}


def test_each_quantity_compares_the_engines_seeds_as_independent_samples(twenty):
    _, rows = twenty
    iif, ppo = (rows.loc[f"{arm}: {engines.FINAL}"] for arm in ("IIF", "Standard PPO"))
    assert (iif["Seeds, default"], iif["Seeds, stacked"]) == ("10", "20")
    assert iif["default: mean ± std"] == "50.000 ± 30.277"  # 5 + 10·s over seeds 0-9
    assert iif["stacked: mean ± std"] == "100.000 ± 59.161"  # over seeds 0-19
    assert iif["stacked − default [95 % CI]"].startswith("+50.000 [")
    # U of the stacked seeds: 10 × 10 pairs above every default seed, 45 above the lower ones, 10 ties counting ½.
    assert iif["Mann–Whitney U"] == ppo["Mann–Whitney U"] == "150"
    finals = [5 + 10 * seed for seed in range(20)]
    assert iif["p (two-sided)"] == f"{stats.mannwhitneyu(finals, finals[:10]).pvalue:.3f}" == "0.029"
    se = rows.loc[f"IIF: {engines.SE_AVE}"]
    assert (se["default: mean ± std"], se["stacked: mean ± std"]) == ("33.3 ± 0.0", "33.3 ± 0.0")
    assert se["stacked − default [95 % CI]"] == "+0.0 [+0.0, +0.0]"
    assert (se["Mann–Whitney U"], se["p (two-sided)"]) == ("100", "1.000")


def test_the_outputs_are_listed_and_redraw_byte_identical(twenty, tmp_path):
    root, _ = twenty
    regenerate(root / "data", tmp_path)
    index = (tmp_path / "INDEX.md").read_text()
    assert "## Engine equivalence (`engine_equivalence`)" in index
    assert "## Engine equivalence: curves (`engine_equivalence_curves`)" in index
    for name in ("engine_equivalence.md", "engine_equivalence.tex", "engine_equivalence_curves.png"):
        assert filecmp.cmp(root / "out" / name, tmp_path / name, shallow=False), name


def test_without_the_stacked_runs_the_table_says_not_run_yet_with_their_command(tmp_path):
    rows = made(tmp_path, 0)
    assert set(rows["stacked: mean ± std"]) == {COMMAND}
    assert set(rows["Seeds, stacked"]) == {"0 of 20"}
    assert not (tmp_path / "data" / "engine_equivalence.csv").exists()


def test_part_of_the_stacked_seeds_are_counted_against_the_twenty(tmp_path):
    rows = made(tmp_path, 3)
    assert set(rows["Seeds, stacked"]) == {"3 of 20"}
    assert rows.loc[f"IIF: {engines.FINAL}", "stacked: mean ± std"] == "15.000 ± 10.000"


def test_todays_engine_needs_ten_committed_seeds_of_each_arm(tmp_path):
    for seed in range(9):
        write_run(tmp_path / "runs", "main", "frozenlake", "ppo", seed)
        write_run(tmp_path / "runs", "main", "frozenlake", "iif-p50", seed)
    results = {
        name: (status, why) for name, status, why in regenerate(tmp_path / "data", tmp_path / "out", tmp_path / "runs")
    }
    status, why = results["engine_equivalence"]
    assert status == "missing" and "main/frozenlake: needs 10 seeds run by every arm, has 9 in common" in why
