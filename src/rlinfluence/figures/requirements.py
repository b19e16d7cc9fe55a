"""What a figure or table is (`Output`) and what any output needs of the committed data (`Requirement`).

An output is made only from all it needs: per environment, a requirement says what is missing
(`shortfalls`); an output whose environments are all missing is reported missing, one with some is
drawn from the complete ones only (`restricted_to`). Runs of the control agent (control_runs.Runs),
an analysis' CSVs (analysis_data.AnalysisData), the language-model runs (rlhf.LMRuns) and several
sources together (fidelity.Sources) are the requirements there are.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, Self, TypeVar, cast

import pandas as pd
from matplotlib.figure import Figure

if TYPE_CHECKING:
    from rlinfluence.figures.render import Section


@dataclass(frozen=True, eq=False)
class FigureData:
    """What outputs are drawn from: the control runs' tidy rows and the data dir, which also holds the
    analyses' and the language-model runs' CSVs."""

    tidy: pd.DataFrame  # runs.load_tidy(data_dir), or rows a test made
    data_dir: Path


class Requirement(Protocol):
    """What an output reads, whether it is all there, and the command that makes it."""

    @property
    def envs(self) -> tuple[str, ...]: ...

    @property
    def experiments(self) -> tuple[str, ...]:
        """The experiments whose runs' tidy rows it reads (those a refresh from runs gathers)."""

    @property
    def command(self) -> str: ...

    def shortfalls(self, data: FigureData) -> dict[str, str]:
        """For each environment that lacks something, what; empty when every environment is complete."""

    def progress(self, data: FigureData) -> dict[str, tuple[int, int]]:
        """Per environment: (what is done towards the output, what it needs)."""

    def select(self, data: FigureData) -> pd.DataFrame:
        """The rows the output is drawn from."""

    def restricted_to(self, envs: tuple[str, ...]) -> Self:
        """The same requirement over `envs` only."""


class RestrictableByEnvs:
    """`restricted_to` of a frozen dataclass: a copy with its field `ENVS` (the envs it covers) replaced."""

    ENVS: ClassVar[str] = "envs"

    def restricted_to(self, envs: tuple[str, ...]) -> Self:
        return cast(Self, replace(cast(Any, self), **{self.ENVS: envs}))  # self is a frozen dataclass


RequirementT = TypeVar("RequirementT", bound=Requirement)


@dataclass(frozen=True)
class Output(Generic[RequirementT]):
    """A figure or table: its requirement's kind (`Output[Runs]`, `Output[AnalysisData]`, ...) is what its
    builder may read of `output.runs`."""

    name: str  # file stem under the output dir
    title: str  # the paper's number for it, e.g. "Table 2"
    caption: str  # what is shown and how it is aggregated; written beside the output
    runs: RequirementT
    # a figure, a table of strings, or tables of strings under headings (render.Section)
    build: Callable[[Output[RequirementT], pd.DataFrame], Figure | pd.DataFrame | tuple[Section, ...]]
