"""docs/extending.md's recipe "Add a filter method", followed by a test: a method defined here (no edit to
src/), registered with `register_method`, its conf/method/ file on a search path of its own, trains two
rounds through the CLI and is filed, hashed and refused like the methods that ship."""

from __future__ import annotations

import re
import sys

import numpy as np
import pytest

from conftest import metrics_rows
from rlinfluence import cli
from rlinfluence.config.paths import REPO_ROOT
from rlinfluence.selection import SELECTION_METHODS, Selection, SelectionMethod, register_method
from rlinfluence.share import FilterShare


class DropLast(SelectionMethod):
    """Drops the last p % of each round's records by id: a rule nobody would use, whose drops are easy to count."""

    settings = ("p",)
    any_agent = True

    def __init__(self, p: FilterShare):
        self.p = p

    @classmethod
    def check_config(cls, cfg):
        FilterShare.parse(cfg.method.p, "method.p")

    @classmethod
    def from_config(cls, cfg):
        return cls(FilterShare.parse(cfg.method.p, "method.p"))

    @classmethod
    def tag(cls, method):
        return f"{method.name}-p{FilterShare.parse(method.p, 'method.p')}"

    def select(self, buffer, scores, rng, attribute=None):
        n_dropped = self.p.count(len(buffer))
        return Selection(np.arange(len(buffer)) < len(buffer) - n_dropped)


@pytest.fixture
def drop_last(tmp_path):
    """The method registered and its conf/method/drop_last.yaml on a search path, for one test."""
    register_method("drop_last")(DropLast)
    (tmp_path / "conf" / "method").mkdir(parents=True)
    (tmp_path / "conf" / "method" / "drop_last.yaml").write_text("name: drop_last\np: 25\n")
    yield f"hydra.searchpath=[file://{tmp_path / 'conf'}]"
    del SELECTION_METHODS["drop_last"]


def run_cli(monkeypatch, *arguments: str) -> None:
    """`rlinfluence <arguments>` in this process. cli.main sets HYDRA_FULL_ERROR for its process: monkeypatch
    puts it back afterwards, so that the CLI subprocesses of later tests still print one-line refusals."""
    monkeypatch.setattr(sys, "argv", ["rlinfluence", *arguments])
    monkeypatch.setenv("HYDRA_FULL_ERROR", "0")
    cli.main()


def test_a_method_defined_outside_src_trains_two_rounds_through_the_cli(tmp_path, monkeypatch, drop_last):
    runs = tmp_path / "runs"
    run_cli(monkeypatch, "debug=smoke", "env=frozenlake", "method=drop_last", drop_last, f"runs_root={runs}")
    (run_dir,) = (runs / "default" / "frozenlake" / "sgd").glob("*/seed0")
    assert re.fullmatch(r"drop_last-p25-[0-9a-f]{6}", run_dir.parent.name)  # its tag; the hash: debug=smoke's budget
    assert (run_dir / "DONE").exists()
    rows = metrics_rows(run_dir)
    assert [row["round"] for row in rows] == ["0", "1", "2"]
    for row in rows[1:]:
        n = int(row["n_records"])
        assert int(row["n_kept"]) == n - int(np.floor(n * 25 / 100))

    # the recipe's figures command, as docs/extending.md writes it, draws the new method's curves
    [figures] = re.findall(r"`rlinfluence (task=figures [^`]*)`", (REPO_ROOT / "docs" / "extending.md").read_text())
    monkeypatch.chdir(tmp_path)  # where the recipe's runs/ is
    run_cli(monkeypatch, *figures.replace("NAME", "default").split())
    assert (runs / "default" / "figures" / "frozenlake_curves.png").exists()


def test_a_method_defined_outside_src_runs_on_the_stacked_engine_as_alone(tmp_path, monkeypatch, drop_last):
    """Nothing engine-specific in the recipe: the same method trains a stacked set, each seed as it does alone."""
    runs = tmp_path / "runs"
    settings = ("debug=smoke", "method=drop_last", "engine=stacked", drop_last)
    run_cli(monkeypatch, *settings, "seeds=[0,1]", f"runs_root={runs / 'set'}")
    run_cli(monkeypatch, *settings, "seeds=[1]", f"runs_root={runs / 'alone'}")
    [among] = (runs / "set").rglob("seed1")
    [alone] = (runs / "alone").rglob("seed1")
    assert metrics_rows(among, timings=False) == metrics_rows(alone, timings=False)
    assert [row["round"] for row in metrics_rows(alone)] == ["0", "1", "2"]


def test_the_new_method_s_settings_are_checked_and_hashed_like_the_shipped_ones(
    tmp_path, monkeypatch, drop_last, capsys
):
    runs = tmp_path / "runs"
    with pytest.raises(SystemExit) as stop:
        run_cli(monkeypatch, "debug=smoke", "method=drop_last", "method.p=150", drop_last, f"runs_root={runs}")
    assert stop.value.code == cli.REFUSED and not runs.exists()
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "rlinfluence: config error: method.p=150.0 must be in (0, 100] (percent of negative-influence records to drop)"
    )
    for p in (25, 50):
        run_cli(monkeypatch, "debug=smoke", "method=drop_last", f"method.p={p}", drop_last, f"runs_root={runs}")
    leaves = sorted(leaf.name for leaf in (runs / "default" / "frozenlake" / "sgd").iterdir())
    assert [leaf[: -len("-123456")] for leaf in leaves] == ["drop_last-p25", "drop_last-p50"]
    assert leaves[0][-6:] == leaves[1][-6:]  # p is in the tag, so it is not hashed


def test_a_name_registered_twice_is_refused(drop_last):
    with pytest.raises(ValueError, match="method 'drop_last' is registered already, by DropLast"):
        register_method("drop_last")(DropLast)
