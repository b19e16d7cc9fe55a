"""Byte-reproducible writers: figures as PNG + PDF, tables as Markdown + LaTeX.

Regenerating from the committed CSVs must reproduce the committed files exactly, so nothing here
may depend on the clock, the machine's fonts or global matplotlib state: figures are built on
`matplotlib.figure.Figure` (no pyplot, no backend), under one fixed style, with dates stripped.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

import matplotlib
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

FIGURE_SUFFIXES = (".png", ".pdf")
TABLE_SUFFIXES = (".md", ".tex")

_STYLE = {
    **sns.axes_style("whitegrid"),
    **sns.plotting_context("paper"),
    "font.family": "DejaVu Sans",  # ships with matplotlib: the same glyphs on every machine
    "savefig.dpi": 150,
}


def figure_style() -> contextlib.AbstractContextManager:
    """The one style every figure is drawn and saved under."""
    return matplotlib.rc_context(_STYLE)


def save_figure(fig: Figure, stem: Path) -> list[Path]:
    """Write `stem`.png and `stem`.pdf without timestamps."""
    paths = [stem.with_suffix(suffix) for suffix in FIGURE_SUFFIXES]
    with figure_style():
        fig.savefig(paths[0], metadata={"Software": None})
        fig.savefig(paths[1], metadata={"CreationDate": None, "Producer": None})
    return paths


def markdown_table(table: pd.DataFrame, caption: str) -> str:
    header = "| " + " | ".join(table.columns) + " |"
    rule = "|" + "|".join("---" for _ in table.columns) + "|"
    rows = ["| " + " | ".join(row) + " |" for row in table.itertuples(index=False)]
    return "\n".join([caption, "", header, rule, *rows]) + "\n"


_LATEX_ESCAPES = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "_": r"\_",
    "#": r"\#",
    "$": r"\$",
    "{": r"\{",
    "}": r"\}",
    "±": r"$\pm$",
    "—": "---",
    "−": "$-$",
}


def latex_escape(text: str) -> str:
    return "".join(_LATEX_ESCAPES.get(char, char) for char in text)


def latex_table(table: pd.DataFrame, caption: str, label: str) -> str:
    lines = [
        r"\begin{table}[ht]",
        r"\centering",
        rf"\caption{{{latex_escape(caption)}}}",
        rf"\label{{{label}}}",
        rf"\begin{{tabular}}{{{'l' * len(table.columns)}}}",
        r"\toprule",
        " & ".join(latex_escape(c) for c in table.columns) + r" \\",
        r"\midrule",
        *(" & ".join(latex_escape(cell) for cell in row) + r" \\" for row in table.itertuples(index=False)),
        r"\bottomrule",
        r"\end{tabular}",
        r"\end{table}",
    ]
    return "\n".join(lines) + "\n"


def save_table(table: pd.DataFrame, stem: Path, caption: str) -> list[Path]:
    """Write `stem`.md and `stem`.tex; every cell of `table` is already a formatted string."""
    paths = [stem.with_suffix(suffix) for suffix in TABLE_SUFFIXES]
    paths[0].write_text(markdown_table(table, caption))
    paths[1].write_text(latex_table(table, caption, label=f"tab:{stem.name}"))
    return paths


@dataclass(frozen=True)
class Section:
    """One table of an output made of several (a build returns a tuple of them): its heading and what it shows."""

    title: str
    note: str
    table: pd.DataFrame  # every cell a formatted string


def save_sections(sections: tuple[Section, ...], stem: Path, caption: str) -> list[Path]:
    """Write `stem`.md (the caption, then each section's heading, note and table) and `stem`.tex (one table per
    section, the first captioned with the output's caption too)."""
    paths = [stem.with_suffix(suffix) for suffix in TABLE_SUFFIXES]
    markdown = [markdown_table(s.table, f"## {s.title}\n\n{s.note}") for s in sections]
    paths[0].write_text("\n".join([caption, "", *markdown]))
    captions = [f"{s.title}: {s.note}" for s in sections]
    captions[0] = f"{caption} {captions[0]}"
    latex = [latex_table(s.table, text, f"tab:{stem.name}-{i}") for i, (s, text) in enumerate(zip(sections, captions))]
    paths[1].write_text("\n".join(latex))
    return paths
