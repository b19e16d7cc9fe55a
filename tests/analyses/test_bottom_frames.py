"""task=bottom_frames (paper Fig. 9, Pong): the written records are the round's most negative ones, with
their own observations (checked against task=diagnose's every-record rows of the same FrozenLake run);
Fig. 9 is drawn from the committed Pong file, byte for byte; and, opt-in, the task end to end on Pong."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from conftest import analysis_output
from rlinfluence.analyses.bottom_frames import read_frames
from rlinfluence.cli import run_task
from rlinfluence.config.paths import REPO_ROOT
from rlinfluence.figures.render import FIGURE_SUFFIXES, save_figure
from rlinfluence.figures.requirements import FigureData
from rlinfluence.figures.section4 import OUTPUTS as SECTION4

FIG9 = next(output for output in SECTION4 if output.name == "fig9_bottom_frames_pong")


def test_bottom_frames_are_the_rounds_most_negative_records_with_their_observations(tmp_path, tiny_config):
    common = (
        "env=frozenlake",
        "env.rounds=3",
        f"runs_root={tmp_path / 'runs'}",
        f"figures.data_dir={tmp_path / 'data'}",
    )
    run_task(
        tiny_config(
            *common, "task=bottom_frames", "analysis.bottom_frames.rounds=[1,3]", "analysis.bottom_frames.bottom=5"
        )
    )
    path, identity = analysis_output(tmp_path / "runs", "bottom_frames", ".npz")
    rows = read_frames(path)
    assert identity["env"] == "frozenlake" and identity["seed"] == 0
    # diagnose replays the same rounds of the same standard run and keeps every record's influence.
    every = run_task(
        tiny_config(*common, "task=diagnose", "analysis.diagnose.rounds=[1,3]", "analysis.diagnose.rollouts=2")
    )
    for k in (1, 3):
        bottom, buffer = rows[rows["round"] == k], every[every["round"] == k].set_index("record")
        assert len(bottom) == 5 and list(bottom["rank"]) == [64, 63, 62, 61, 60]
        np.testing.assert_array_equal(bottom["influence"], np.sort(buffer["influence"])[:5])
        same = buffer.loc[bottom["record"]]
        np.testing.assert_array_equal(bottom["influence"], same["influence"])
        np.testing.assert_array_equal(bottom["action"], same["action"])
        observations = np.stack(bottom["obs"].to_list())
        assert observations.shape == (5, 16)  # FrozenLake's one-hot state
        np.testing.assert_array_equal(observations.argmax(1), same["state"])


def test_fig9_is_drawn_from_the_committed_pong_frames_byte_for_byte(tmp_path):
    data = FigureData(pd.DataFrame(), REPO_ROOT / "paper_figures" / "data")
    assert not FIG9.runs.shortfalls(data)
    rows = FIG9.runs.select(data)
    assert len(rows) == 10 and (rows["influence"] < 0).all() and rows["influence"].is_monotonic_increasing
    assert all(frames.shape == (4, 84, 84) and frames.dtype == np.uint8 for frames in rows["obs"])
    for again in ("a", "b"):
        figure = FIG9.build(FIG9, rows)
        assert isinstance(figure, Figure)
        save_figure(figure, tmp_path / again)
    for suffix in FIGURE_SUFFIXES:
        committed = (REPO_ROOT / "paper_figures" / FIG9.name).with_suffix(suffix).read_bytes()
        assert (
            (tmp_path / "a").with_suffix(suffix).read_bytes()
            == (tmp_path / "b").with_suffix(suffix).read_bytes()
            == committed
        )


@pytest.mark.long
def test_bottom_frames_on_pong_writes_stacked_uint8_frames(tmp_path, tiny_config):
    """About 2 min on one busy thread, most of it the two one-episode evaluations (round 0 and the last)."""
    table = run_task(
        tiny_config(
            "env=pong",
            "env.rounds=1",
            "env.n_steps=16",
            "ppo.batch_size=64",
            "eval.episodes=1",
            "eval.n_parallel=1",
            "task=bottom_frames",
            "analysis.bottom_frames.rounds=[1]",
            "analysis.bottom_frames.bottom=3",
            f"runs_root={tmp_path / 'runs'}",
            f"figures.data_dir={tmp_path / 'data'}",
        )
    )
    rows = read_frames(analysis_output(tmp_path / "runs", "bottom_frames", ".npz")[0])
    assert list(rows["rank"]) == [128, 127, 126] and rows["influence"].is_monotonic_increasing
    np.testing.assert_array_equal(rows["influence"], table["influence"])
    frames = np.stack(rows["obs"].to_list())
    assert frames.shape == (3, 4, 84, 84) and frames.dtype == np.uint8
