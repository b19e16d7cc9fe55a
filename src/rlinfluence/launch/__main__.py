"""``python -m rlinfluence.launch``: the same as ``rlinfluence-manifest`` (launch/slurm.py)."""

import sys

from rlinfluence.launch.slurm import main

sys.exit(main())
