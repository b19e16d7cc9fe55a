"""Where the checkout's files are: the bottom layer, so that every module may import it.

The package is installed editable from the checkout (see README), so the repo's top-level `conf/` sits
two levels above this file.
"""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
CONFIG_DIR = str(REPO_ROOT / "conf")
