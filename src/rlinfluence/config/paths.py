"""Where the package's files are, and whether a directory a command will write can be written.

`conf/` is found through the package, which ships it (pyproject.toml's package data): in a checkout,
`src/rlinfluence/conf` links to the repo's top-level `conf/`; an installed wheel holds a copy. The
checkout's other files (paper_figures/, sbatch/, benchmarks/) exist only in a checkout or an editable
install: `REPO_ROOT` is for them alone.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from rlinfluence.choices import ConfigError, require

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # src/rlinfluence, above this config/ folder
CONFIG_DIR = str((PACKAGE_DIR / "conf").resolve())  # the repo's conf/ itself in a checkout, not the link
REPO_ROOT = PACKAGE_DIR.parents[1]


def check_folder_name(key: str, name: str) -> None:
    """`name` becomes one folder of the paths written (experiment_name in a run dir's): never a path that
    leaves the folder it is put in, nor none at all."""
    require(
        name not in ("", ".", "..") and "/" not in name and os.sep not in name,
        f"{key}={name!r} must be one folder name (not empty, no '/', not '.' or '..')",
    )


def check_writable(key: str, path: str | Path) -> None:
    """`path` (a directory, made if missing) can be written: its nearest existing ancestor must be a
    directory in which a directory can be made. Checked before a command writes anything, so it never fails
    half way. The probe makes one and removes it: permission bits miss what root cannot write either
    (/proc, /sys, a read-only mount)."""
    existing = Path(path).absolute()
    while not existing.exists():
        existing = existing.parent
    require(existing.is_dir(), f"{key}={path} is not writable: {existing} is not a directory")
    require(os.access(existing, os.W_OK | os.X_OK), f"{key}={path} is not writable: {existing} is read-only")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".rlinfluence-probe-", dir=existing))
    except OSError as error:
        raise ConfigError(
            f"{key}={path} is not writable: {existing} refuses a new directory ({error.strerror})"
        ) from None
