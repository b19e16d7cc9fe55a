"""What code and which libraries made a result.

A run is bit-identical on replay (task=replay) only on the same code, library versions, OS, device and
thread count; `summary.json` and every tidy row record the first two, so a reader can tell whether a
replay that differs is a finding or a change of versions.
"""

from __future__ import annotations

import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

from rlinfluence.config.paths import REPO_ROOT

# The libraries whose versions can change a run's numbers: the tensors, the envs and their simulators,
# the language models.
LIBRARIES = ("torch", "numpy", "gymnasium", "highway-env", "minigrid", "box2d", "ale-py", "transformers", "peft")
# What each tidy row carries (figures/runs.py); `versions` is one `name==version` list, `;`-joined.
PROVENANCE_COLUMNS = ["code_commit", "code_dirty", "versions"]


def _git(where: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=where, capture_output=True, text=True, check=True).stdout.strip()


def code_version(where: Path = REPO_ROOT) -> tuple[str | None, bool | None]:
    """(commit, whether tracked files differ from it); (None, None) outside a git checkout."""
    try:
        return _git(where, "rev-parse", "HEAD"), bool(_git(where, "status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.CalledProcessError):
        return None, None


def describe_code_version(where: Path = REPO_ROOT) -> str:
    """``<sha>``, ``<sha> (uncommitted changes)``, or ``unknown (not a git checkout)``."""
    commit, dirty = code_version(where)
    if commit is None:
        return "unknown (not a git checkout)"
    return f"{commit} (uncommitted changes)" if dirty else commit


def library_versions() -> str:
    """`torch==2.13.0+cpu;numpy==2.4.6;...` for those of LIBRARIES that are installed."""

    def installed(name: str) -> str | None:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    return ";".join(f"{name}=={version}" for name in LIBRARIES if (version := installed(name)) is not None)


def provenance() -> dict[str, Any]:
    commit, dirty = code_version()
    return {"code_commit": commit, "code_dirty": dirty, "versions": library_versions()}


def merged_provenance(earlier: list[dict[str, Any]], now: dict[str, Any]) -> list[dict[str, Any]]:
    """The provenances of every process that trained a run, in order (a resume under other code or
    versions adds one)."""
    return earlier if earlier and earlier[-1] == now else [*earlier, now]


def tidy_provenance(processes: list[dict[str, Any]]) -> dict[str, Any]:
    """A run's PROVENANCE_COLUMNS: each one's distinct values over its processes, `+`-joined; empty for a
    run recorded before summary.json kept them."""

    def joined(column: str) -> Any:
        values = list(dict.fromkeys(str(process[column]) for process in processes))
        return "+".join(values) if values else None

    return {column: joined(column) for column in PROVENANCE_COLUMNS}
