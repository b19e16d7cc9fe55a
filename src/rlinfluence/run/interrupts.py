"""Ctrl-C (SIGINT) and SIGTERM stop a training run between its writes, never inside them.

While a run trains, both signals raise `Interrupted` in the main thread; during a round's writes (its
metrics row, snapshot, checkpoint and summary) they wait until the writes are done, so an interrupted run
leaves no temporary file and its `summary.json` agrees with `metrics.csv` and the checkpoint. The CLI
turns `RunInterrupted` into one line and exit code 128 + the signal's number (130 for Ctrl-C).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

# Python's own handlers: only these are replaced. A launcher that handles a signal itself (submitit
# turns SIGTERM into a no-op and requeues on SIGUSR2) keeps its handler.
PYTHON_DEFAULTS = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL}


class Interrupted(BaseException):
    """A stop signal; a BaseException like KeyboardInterrupt, so that no `except Exception` swallows it."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.exit_code = 128 + signum


class RunInterrupted(Exception):
    """A run stopped by a signal: the one line to say and the exit code."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code


class StopSignals:
    def __init__(self) -> None:
        self.deferring = False
        self.pending: int | None = None

    def _handle(self, signum: int, frame: object) -> None:
        if self.deferring:
            self.pending = signum
        else:
            raise Interrupted(signum)

    @contextmanager
    def installed(self) -> Iterator[StopSignals]:
        replaced = {}
        if threading.current_thread() is threading.main_thread():  # Python delivers signals to the main thread only
            for signum, default in PYTHON_DEFAULTS.items():
                if signal.getsignal(signum) is default:
                    replaced[signum] = signal.signal(signum, self._handle)
        try:
            yield self
        finally:
            for signum, handler in replaced.items():
                signal.signal(signum, handler)

    @contextmanager
    def deferred(self) -> Iterator[None]:
        """Writes that belong together: a signal that comes during them is raised after them."""
        self.deferring = True
        try:
            yield
        finally:
            self.deferring = False
        if self.pending is not None:
            raise Interrupted(self.pending)
