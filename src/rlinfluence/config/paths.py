"""Where the package's files are: the bottom layer, so that every module may import it.

`conf/` is found through the package, which ships it (pyproject.toml's package data): in a checkout,
`src/rlinfluence/conf` links to the repo's top-level `conf/`; an installed wheel holds a copy. The
checkout's other files (paper_figures/, sbatch/, benchmarks/) exist only in a checkout or an editable
install: `REPO_ROOT` is for them alone.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # src/rlinfluence, above this config/ folder
CONFIG_DIR = str((PACKAGE_DIR / "conf").resolve())  # the repo's conf/ itself in a checkout, not the link
REPO_ROOT = PACKAGE_DIR.parents[1]
