"""Regenerate paper_figures/ from paper_figures/data/ (same as `rlinfluence task=figures`).

    python paper_figures/make_figures.py [--runs-root runs]

With --runs-root, the tidy CSVs in data/ are first refreshed from the finished runs there.
"""

import argparse
from pathlib import Path

from rlinfluence.figures import regenerate

HERE = Path(__file__).resolve().parent

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs-root", default=None, help="refresh data/ from these run directories first")
    args = parser.parse_args()
    for name, status, message in regenerate(HERE / "data", HERE, args.runs_root):
        print(f"{status:8s} {name}: {message}")
