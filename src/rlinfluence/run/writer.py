"""A run dir has one writer: the process that trains a run holds an exclusive lock on its `writer.lock`
for as long as it writes there, and a second process that would train the same run is refused before it
writes anything, in one line that names the run and the holder.

The lock is `flock(2)` on a file inside the run dir, taken without waiting. The kernel drops it when its
holder ends however it ends (exit, crash, `kill -9`, a preempted SLURM task), so a dead holder never blocks a
resume and there is no stale lock to clean up. On NFS, Linux takes `flock` as a POSIX byte-range lock on the
server (NFSv4, or v3 with lockd): two nodes exclude each other; a node that dies holding a lock keeps it until
the server's lease expires (NFSv4's default: 90 s). A mount with `-o local_lock=flock` or `nolock` makes
the lock local to each node: there, a run dir on it can be trained from two nodes at once.

The lock file stays after its holder ends (deleting it would let a process that opened it before the
deletion and one that opens it after both hold "the" lock); it holds the last holder's host and pid, which
is what a refusal names.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
from collections.abc import Iterator, Sequence
from pathlib import Path

from rlinfluence.run.checkpoint import RunDirError
from rlinfluence.run.rundir import create_run_dir

WRITER_LOCK = "writer.lock"


class RunDirBusy(RunDirError):
    """Another live process is training this run."""


def holder(run_dir: Path) -> str:
    """Who holds (or last held) the run's lock, as its file says: `host <name>, pid <pid>`."""
    try:
        text = (run_dir / WRITER_LOCK).read_text().strip()
    except OSError:
        text = ""
    return text or "a process that has not yet written its name"


def _lock(run_dir: Path) -> int:
    """The open, locked lock file of `run_dir` (an existing directory); RunDirBusy when a live process holds it."""
    descriptor = os.open(run_dir / WRITER_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(descriptor)
        raise RunDirBusy(
            f"{run_dir} is being trained by another process ({holder(run_dir)}); a run dir has one writer: "
            "rerun this command once that process has ended, and it resumes where that one stopped"
        ) from None
    os.ftruncate(descriptor, 0)
    os.write(descriptor, f"host {socket.gethostname()}, pid {os.getpid()}\n".encode())
    return descriptor


@contextlib.contextmanager
def sole_writer(run_dirs: Sequence[Path], runs_root: str) -> Iterator[None]:
    """Hold the writer lock of every run dir in `run_dirs` (creating those that do not exist) for the block, or
    none of them: RunDirBusy, and every lock taken so far released, as soon as one is held elsewhere. The run
    dirs that exist are tried first, so that a refused command has created no new one unless it lost a race
    for it."""
    held: list[int] = []
    existing = [path for path in run_dirs if path.is_dir()]
    try:
        for path in [*existing, *(path for path in run_dirs if path not in existing)]:
            create_run_dir(path, runs_root)
            held.append(_lock(path))
        yield
    finally:
        for descriptor in held:
            os.close(descriptor)  # closing the file releases its lock
