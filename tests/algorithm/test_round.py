"""End-to-end behaviour of the round loop: outputs, determinism, selection counts."""

from __future__ import annotations

import json
import time
from typing import ClassVar

import numpy as np
import pytest
import torch

from conftest import cli_run, metrics_rows, rounds_in, tiny
from rlinfluence.cli import run_task
from rlinfluence.round import COLUMNS, OneByOne, RoundFailed, initial_rows, run_round
from rlinfluence.run.loop import read_resume
from rlinfluence.selection import DropMostNegative, DropRandom, Influence, KeepAll, Selection, make_selection, n_to_drop
from rlinfluence.share import FilterShare
from rlinfluence.update import minibatch_ids


def test_run_writes_metrics_summary_checkpoint_and_done(tmp_path, tiny_config):
    summary = run_task(tiny_config("env=frozenlake", "method=iif"), tmp_path)
    rows = metrics_rows(tmp_path, timings=False)
    assert [int(r["round"]) for r in rows] == [0, 1, 2]
    assert all(int(r["n_records"]) == 64 for r in rows[1:])
    assert all(int(r["n_kept"]) == 64 - int(np.floor(int(r["n_negative"]) * 0.5)) for r in rows[1:])
    assert json.loads((tmp_path / "summary.json").read_text()) == summary
    assert summary["done"] and summary["rounds_completed"] == 2
    assert (tmp_path / "checkpoint.pt").exists() and (tmp_path / "DONE").exists()


def test_a_finished_run_is_not_recomputed(tmp_path, tiny_config):
    cfg = tiny_config("env=frozenlake")
    run_task(cfg, tmp_path)
    before = (tmp_path / "metrics.csv").read_text()
    assert run_task(cfg, tmp_path) is None
    assert (tmp_path / "metrics.csv").read_text() == before


@pytest.mark.parametrize("env", ["frozenlake", "acrobot"])
def test_same_seed_gives_identical_metrics(tmp_path, tiny_config, env):
    for name in ("a", "b"):
        run_task(tiny_config(f"env={env}", "method=random", "seed=7"), tmp_path / name)
    run_task(tiny_config(f"env={env}", "method=random", "seed=8"), tmp_path / "c")
    assert metrics_rows(tmp_path / "a", timings=False) == metrics_rows(tmp_path / "b", timings=False)
    assert metrics_rows(tmp_path / "a", timings=False) != metrics_rows(tmp_path / "c", timings=False)


class ScriptedAgent:
    """An agent (round.Agent) reduced to what the loop asks of one: four records a round with influence
    −2, −1, 0, 1, and a log of the stages in the order the loop calls them."""

    columns: ClassVar[list[str]] = [*COLUMNS, "scripted"]

    def __init__(self, cfg):
        self.cfg, self.method, self.selection_rng, self.stages = cfg, make_selection(cfg), np.random.default_rng(0), []

    def state_fields(self):
        return {"scripted": 1.0}

    def collect(self, k):
        self.stages.append("collect")
        return np.arange(4)

    def forward(self, k, records):
        self.stages.append("forward")
        return {}

    def attribute(self, k, records):
        self.stages.append("attribute")
        return Influence(records - 2.0)

    def update(self, k, records, selection, influence):
        self.stages.append("update")
        return {"gradient_steps": int(selection.n_kept)}

    def train_return(self, records):
        return 0.5

    def evaluate(self, k):
        self.stages.append("evaluate")
        return {"test_return": float(k), "eval_episodes": 1}

    # The rest of round.Agent, which the run (run/loop.py) calls around the rounds and a round never does.
    @classmethod
    def check_config(cls, cfg):
        pass

    def state_dict(self, k):
        raise AssertionError("a round does not checkpoint")

    def load_state_dict(self, state):
        raise AssertionError("a round does not resume")

    def close(self):
        pass


def test_the_loop_runs_any_agents_stages_in_order_and_writes_every_column(tiny_config):
    agent = ScriptedAgent(tiny_config("method=iif", "method.p=100", "env.rounds=3", "eval.every=2"))
    rows = initial_rows(OneByOne([agent])) + [row for k in (1, 2, 3) for row in run_round(OneByOne([agent]), k)]
    assert agent.stages[:7] == [
        "evaluate",
        "collect",
        "forward",
        "attribute",
        "update",  # round 1 skips evaluation
        "collect",
        "forward",
    ]
    assert all(list(row) == agent.columns for row in rows)
    assert [row["eval_episodes"] for row in rows] == [1, 0, 1, 1]  # eval.every=2, and always the last round
    assert np.isnan(rows[1]["test_return"]) and rows[2]["test_return"] == 2.0
    assert (rows[1]["n_records"], rows[1]["n_negative"], rows[1]["n_kept"], rows[1]["gradient_steps"]) == (4, 2, 2, 2)
    assert rows[3]["env_steps"] == 12 and rows[1]["train_return"] == 0.5 and rows[0]["scripted"] == 1.0
    assert all(np.isnan(row[column]) for row in rows for column in ("policy_loss", "influence_step_spearman"))
    assert rows[0]["gradient_steps"] == 0 and np.isnan(rows[0]["kept_fraction"])


# A finite s* so large that a ReLU policy's logits overflow to inf - inf = NaN at s*: f_action, and with it
# every score, is NaN in round 1 (validation refuses only a non-finite s* itself).
OVERFLOWING_TARGET = (
    "env=acrobot",
    "env.network.activation=relu",
    "target=action",
    "target.state=[3e38,3e38,-3e38,3e38,3e38,-3e38]",
    "target.action=[1]",
)


def test_a_round_with_non_finite_scores_stops_the_run_in_one_line_before_writing_the_round(tmp_path):
    """Issue 55: NaN scores used to train on silently (nothing dropped). The run stops instead, its run dir
    holding round 0 whole, and a rerun resumes from there (and stops again at the same round)."""
    failed = cli_run(tmp_path, "debug=smoke", *OVERFLOWING_TARGET)
    assert failed.returncode == 1 and "Traceback" not in failed.stderr, failed.stderr
    line = failed.stderr.strip().splitlines()[-1]
    assert line.startswith("rlinfluence: round 1: 64 of 64 influence scores are not finite (NaN or inf)"), line
    [run_dir] = [path.parent for path in tmp_path.rglob("checkpoint.pt")]
    checkpoint = read_resume(run_dir).checkpoint
    assert rounds_in(run_dir) == [0] and checkpoint is not None and checkpoint["round"] == 0
    assert not json.loads((run_dir / "summary.json").read_text())["done"]
    with pytest.raises(RoundFailed, match="^round 1: 64 of 64 influence scores are not finite"):
        run_task(tiny(tmp_path, *OVERFLOWING_TARGET), run_dir)
    assert rounds_in(run_dir) == [0]


def test_iif_drops_exactly_the_most_negative_records():
    scores = np.array([0.5, -3.0, -1.0, 2.0, -2.0, -0.5, 0.0])  # 4 negatives
    selection = DropMostNegative(FilterShare(50)).select(np.empty(7), scores, np.random.default_rng(0))
    assert n_to_drop(scores, FilterShare(50)) == 2
    assert np.flatnonzero(~selection.keep).tolist() == [1, 4]  # -3.0 and -2.0


def test_p100_with_every_record_negative_drops_everything_without_error():
    scores = -np.arange(1.0, 6.0)
    assert DropMostNegative(FilterShare(100)).select(np.empty(5), scores, np.random.default_rng(0)).n_kept == 0


def test_random_drops_as_many_as_iif_and_depends_on_the_seed():
    scores = np.linspace(-1, 1, 101)  # 50 negatives
    drops = [
        ~DropRandom(FilterShare(25)).select(np.empty(101), scores, np.random.default_rng(s)).keep for s in (0, 0, 1)
    ]
    assert [d.sum() for d in drops] == [12, 12, 12]
    assert (drops[0] == drops[1]).all() and not (drops[0] == drops[2]).all()


def test_fewer_kept_records_mean_fewer_minibatches():
    rng = np.random.default_rng(0)
    everything = KeepAll().select(np.empty(100), None, rng)
    keep = np.zeros(100, bool)
    keep[:10] = True
    assert [len(b) for b in minibatch_ids(everything, 32, rng)] == [32, 32, 32, 4]
    small = list(minibatch_ids(Selection(keep), 32, rng))
    assert len(small) == 1 and sorted(small[0].tolist()) == list(range(10))
    assert set(torch.cat(list(minibatch_ids(Selection(keep), 4, rng))).tolist()) == set(range(10))


def written_record_log(path, timeout_s: float = 60.0) -> bytes:
    """The offline run's record log once wandb-core has written it: its writer process can still be flushing
    after `finish()` returns (observed with wandb 0.31), leaving only the 7-byte header for a moment."""
    deadline = time.monotonic() + timeout_s
    while len(record_log := path.read_bytes()) <= 7 and time.monotonic() < deadline:
        time.sleep(0.2)
    return record_log


def test_wandb_offline_mirror_writes_a_run_with_the_resolved_config(tmp_path, tiny_config, monkeypatch):
    monkeypatch.delenv("WANDB_MODE", raising=False)
    run_task(tiny_config("logger=wandb", "logger.mode=offline"), tmp_path)
    runs = list((tmp_path / "wandb").glob("offline-run-*"))
    assert len(runs) == 1 and list(runs[0].glob("*.wandb"))
    record_log = written_record_log(next(runs[0].glob("*.wandb")))  # offline: config and history live here
    assert b"FrozenLake-v1" in record_log and b"${" not in record_log  # the config went in resolved
