"""Section 4's figures and tables, in the order INDEX.md lists them, each drawn from an analysis' own CSVs
(analyses/), not from runs: the diagnosis (diagnosis.py, with Pong's bottom frames, bottom_frames.py), the
single-round intervention (intervention.py) and the behaviour-formation timeline (timeline.py)."""

from __future__ import annotations

from rlinfluence.figures import bottom_frames, diagnosis, intervention, timeline
from rlinfluence.figures.requirements import Output

OUTPUTS: tuple[Output, ...] = (
    *diagnosis.BOTTOM_RECORD_OUTPUTS,
    bottom_frames.FIG9,
    *diagnosis.RANK_OUTPUTS,
    *intervention.OUTPUTS,
    *timeline.OUTPUTS,
)
