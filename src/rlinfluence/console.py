"""The console entry point (`rlinfluence`, `python -m rlinfluence`): the CLI imported and run inside one
Ctrl-C guard. Importing the CLI takes seconds (torch, scipy, gymnasium, hydra), and a Ctrl-C then would
otherwise end in a traceback of whichever import it landed in; this module imports nothing heavy itself, so it
pins the floating-point kernels (rlinfluence/kernels.py) before torch loads."""

from __future__ import annotations

import signal
import sys

from rlinfluence.kernels import pin_kernels


def main() -> None:
    """Ctrl-C wherever it lands outside a training run (importing, composing, figures, an analysis' rounds):
    one line and exit 130. A training run stops between its writes and says in which round (run/loop.py)."""
    try:
        pin_kernels()
    except ValueError as refused:  # RLINFLUENCE_KERNELS with a value it does not take
        print(f"rlinfluence: {refused}", file=sys.stderr)
        raise SystemExit(2) from None
    try:
        from rlinfluence.cli import main as cli_main

        cli_main()
    except KeyboardInterrupt:
        print("rlinfluence: interrupted", file=sys.stderr)
        raise SystemExit(128 + signal.SIGINT) from None
