"""What code, which libraries and which hardware made a result.

A run is bit-identical on replay (task=replay) only on the same code, library versions, device, thread
count and floating-point kernels (rlinfluence/kernels.py: pinned, the same on any x86-64 CPU with AVX2, or
the CPU's own); `summary.json` and every tidy row record them, so a reader can tell whether a replay that
differs is a finding, a change of versions or another machine.
"""

from __future__ import annotations

import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

from rlinfluence.config.paths import REPO_ROOT
from rlinfluence.kernels import UNKNOWN, cpu_model, kernels_in_force

# The libraries whose versions can change a run's numbers: the tensors, the envs and their simulators,
# the language models.
LIBRARIES = ("torch", "numpy", "gymnasium", "highway-env", "minigrid", "box2d", "ale-py", "transformers", "peft")
# What each tidy row carries (figures/runs.py); `versions` is one `name==version` list, `;`-joined.
PROVENANCE_COLUMNS = ["code_commit", "code_dirty", "versions"]
# What decides the floating-point path: the CPU model, the kernels in force (kernels.kernels_in_force), torch's
# thread count and the device (a GPU by name). A tidy CSV has these columns only once a row has values in them
# (figures/runs.py): the rows committed before runs recorded them keep their bytes, and read as unknown.
HARDWARE_COLUMNS = ["cpu", "kernels", "threads", "device"]


def _git(where: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=where, capture_output=True, text=True, check=True).stdout.strip()


def code_version(where: Path = REPO_ROOT) -> tuple[str | None, bool | None]:
    """(commit, whether tracked files differ from it); (None, None) outside a git checkout."""
    try:
        return _git(where, "rev-parse", "HEAD"), bool(_git(where, "status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.CalledProcessError):
        return None, None


def is_ancestor(commit: str, of: str, where: Path = REPO_ROOT) -> bool | None:
    """Whether `commit` is `of` or made before it; None where git cannot tell (no checkout, an unknown commit)."""
    try:
        _git(where, "cat-file", "-e", f"{commit}^{{commit}}")
    except (OSError, subprocess.CalledProcessError):
        return None
    try:
        _git(where, "merge-base", "--is-ancestor", commit, of)
    except subprocess.CalledProcessError:
        return False
    return True


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


def device_name(device: str) -> str:
    """`cpu`, or `cuda (NVIDIA H100 80GB HBM3)`: a GPU's kernels are its model's."""
    import torch  # here, not at the top: the CLI's --help imports this module (via launch/) and must not load torch

    return device if device == "cpu" else f"{device} ({torch.cuda.get_device_name(torch.device(device))})"


def provenance(device: str) -> dict[str, Any]:
    """This process's PROVENANCE_COLUMNS and HARDWARE_COLUMNS, training on `device` (the run's `device`)."""
    import torch  # as in device_name

    commit, dirty = code_version()
    return {
        "code_commit": commit,
        "code_dirty": dirty,
        "versions": library_versions(),
        "cpu": cpu_model(),
        "kernels": kernels_in_force(),
        "threads": torch.get_num_threads(),
        "device": device_name(device),
    }


def merged_provenance(earlier: list[dict[str, Any]], now: dict[str, Any]) -> list[dict[str, Any]]:
    """The provenances of every process that trained a run, in order (a resume under other code or
    versions adds one)."""
    return earlier if earlier and earlier[-1] == now else [*earlier, now]


def tidy_provenance(processes: list[dict[str, Any]]) -> dict[str, Any]:
    """A run's PROVENANCE_COLUMNS and HARDWARE_COLUMNS: each one's distinct values over its processes,
    `+`-joined; empty for a run recorded before summary.json kept them (a process recorded before runs named
    their hardware is `unknown` there)."""

    def joined(column: str) -> Any:
        if not any(column in process for process in processes):
            return None
        return "+".join(dict.fromkeys(str(process.get(column, UNKNOWN)) for process in processes))

    return {column: joined(column) for column in PROVENANCE_COLUMNS + HARDWARE_COLUMNS}
