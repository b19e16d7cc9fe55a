"""The console entry points (`rlinfluence`, `python -m rlinfluence`, `rlinfluence-manifest`): the reproduction's
commands, imported and run inside one guard. Importing the CLI takes seconds (torch, scipy, gymnasium, hydra), and
a Ctrl-C then would otherwise end in a traceback of whichever import it landed in; this module imports nothing
heavy itself. Where only the library is installed (`pip install rlinfluence`, no `repro` extra), the commands say
in one line what to install instead of a traceback of the first missing package. Importing nothing heavy, it
pins the floating-point kernels (rlinfluence/kernels.py) before torch loads."""

from __future__ import annotations

import importlib
import signal
import sys

from rlinfluence.kernels import pin_kernels

REPRO_INSTALL = 'pip install "rlinfluence[repro]"'
REFUSED = 2  # the CLI's exit code of a command refused as given (cli.REFUSED): nothing ran


def _run_main_of(module: str) -> object:
    """Imports `module` and runs its `main`. Ctrl-C wherever it lands outside a training run (importing,
    composing, figures, an analysis' rounds): one line and exit 130. A training run stops between its writes and
    says in which round (run/loop.py)."""
    try:
        pin_kernels()
    except ValueError as refused:  # RLINFLUENCE_KERNELS with a value it does not take
        print(f"rlinfluence: {refused}", file=sys.stderr)
        raise SystemExit(REFUSED) from None
    try:
        try:
            command = importlib.import_module(module).main
        except ModuleNotFoundError as missing:
            if (missing.name or "rlinfluence").split(".")[0] == "rlinfluence":
                raise  # a module of this package: a broken install or a bug, not the missing extra
            print(
                f"rlinfluence: the command line needs the reproduction's packages ({missing.name} is not "
                f"installed): {REPRO_INSTALL}",
                file=sys.stderr,
            )
            raise SystemExit(REFUSED) from None
        return command()
    except KeyboardInterrupt:
        print("rlinfluence: interrupted", file=sys.stderr)
        raise SystemExit(128 + signal.SIGINT) from None


def main() -> None:
    _run_main_of("rlinfluence.cli")


def manifest() -> object:
    """`rlinfluence-manifest`: its exit code is what launch/slurm.py's main returns."""
    return _run_main_of("rlinfluence.launch.slurm")
