"""Fig. 9 (Pong): the stacked frames of a round's records of most negative influence, drawn from
task=bottom_frames' NPZ files (Pong has no settable state, so the diagnosis' views cannot be redrawn)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
from matplotlib.figure import Figure

from rlinfluence.analyses.bottom_frames import read_frames
from rlinfluence.figures.analysis_data import AnalysisData
from rlinfluence.figures.render import figure_style
from rlinfluence.figures.requirements import Output


@dataclass(frozen=True)
class FrameData(AnalysisData):
    """task=bottom_frames' rows: NPZ files, as a record's frames do not fit a CSV row."""

    suffix = ".npz"
    read = staticmethod(read_frames)


FRAMES_ROUND = 15  # k of the short Pong run below (the paper gives none for Fig. 9)
# The short run: 15 rounds of 1,024 records, at the preset's start-of-run lr and clip range (its linear decay
# over 9,766 rounds leaves them at 99.8 % by round 15; over env.rounds=15 it would take them to 0), and one
# evaluation episode at the last round (none is read here).
_FRAMES_RUN = (
    f"env.rounds={FRAMES_ROUND} ppo.lr_schedule=constant ppo.clip_range_schedule=constant "
    f"eval.every=1000 eval.episodes=1 eval.n_parallel=1 analysis.bottom_frames.rounds=[{FRAMES_ROUND}]"
)
# ALE's Pong actions; the agent's paddle is the right one, which RIGHT moves up and LEFT down.
PONG_ACTIONS = ("NOOP", "FIRE", "RIGHT (up)", "LEFT (down)", "RIGHTFIRE (up)", "LEFTFIRE (down)")
RECORDS_PER_ROW = 2


def bottom_frames_figure(output: Output[FrameData], rows: pd.DataFrame) -> Figure:
    """Fig. 9 (Pong): each record's stacked frames, oldest first, the most negative influence first."""
    [k] = output.runs.rounds
    rows = rows[rows["round"] == k].sort_values(["seed", "influence"])
    panel_rows = -(-len(rows) // RECORDS_PER_ROW)
    with figure_style():
        fig = Figure(figsize=(3.9 * RECORDS_PER_ROW, 1.25 * panel_rows + 0.7), layout="constrained")
        for panel, record in zip(fig.subfigures(panel_rows, RECORDS_PER_ROW, squeeze=False).ravel(), rows.itertuples()):
            frames = record.obs
            for ax, age, frame in zip(panel.subplots(1, len(frames)), range(1 - len(frames), 1), frames):
                ax.imshow(frame, cmap="gray", vmin=0, vmax=255)
                ax.set(xticks=[], yticks=[])
                ax.set_xlabel(f"t−{-age}" if age else "t", fontsize=6)
                ax.grid(False)
            panel.suptitle(
                f"seed {record.seed}, rank {record.rank}/{record.n_records}: I = {record.influence:.3g}, "
                f"{PONG_ACTIONS[record.action]}, Â {record.advantage_gae:.2f}",
                fontsize=7,
            )
        fig.suptitle(f"{output.title}: {output.caption}", wrap=True)
    return fig


FIG9 = Output(
    "fig9_bottom_frames_pong",
    "Fig. 9 (Pong)",
    f"The stacked frames (t−3 … t, as the policy sees them) of the records of most negative influence "
    f"(f_return) in round {FRAMES_ROUND}'s buffer of a short standard-PPO run on Pong, with the action "
    f"taken and its GAE advantage Â.",
    FrameData("bottom_frames", ("pong",), 1, (FRAMES_ROUND,), _FRAMES_RUN),
    bottom_frames_figure,
)
