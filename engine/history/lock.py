"""Which history writers are still alive, so crash recovery never touches a live stream.

Each process that writes turns holds an exclusive OS lock on its own small file
(`<db>.writers/<token>.lock`) for as long as its store is open, and stamps its turns with
the token. The OS drops the lock when the process dies, however it dies (SIGKILL
included), so at the next start a turn still open whose writer's file can be locked was
cut off by a crash; one whose file is still locked belongs to a running Ember (the GUI
while `ember chat` runs, say) and is left alone.
"""

from __future__ import annotations

import logging
import os
import sys
import time
import uuid
from pathlib import Path
from typing import IO

log = logging.getLogger("engine.history")

STALE_LOCK_AGE_S = 24 * 3600.0


def try_lock(handle: IO[bytes]) -> bool:
    """Take the exclusive lock without waiting; False when another open file holds it."""
    if sys.platform == "win32":
        import msvcrt

        try:
            msvcrt.locking(handle.fileno(), msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True
    import fcntl

    try:
        # flock (not lockf): two opens in one process conflict too, like two processes.
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


class WriterLock:
    """This process's liveness token; lock it before any turn carries its token."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.token = uuid.uuid4().hex
        self.path = directory / f"{self.token}.lock"
        self._handle: IO[bytes] | None = open(self.path, "a+b")  # held until release()
        if not try_lock(self._handle):
            self._handle.close()
            raise OSError(f"cannot lock {self.path}")

    def release(self) -> None:
        """Drop the lock and the file; the caller has finished all its turns."""
        if self._handle is None:
            return
        self._handle.close()  # first: Windows will not delete an open file
        self._handle = None
        try:
            self.path.unlink(missing_ok=True)
        except OSError as exc:  # the sweep takes it later
            log.debug("could not remove %s: %s", self.path, exc)


def writer_alive(directory: Path, token: str) -> bool:
    """Whether the writer with `token` still holds its lock (a missing file means it is gone)."""
    if not token or any(c not in "0123456789abcdef" for c in token):
        return False
    path = directory / f"{token}.lock"
    try:
        handle = open(path, "rb")  # closed below
    except OSError:
        return False
    with handle:
        return not try_lock(handle)


def forget_writer(directory: Path, token: str) -> None:
    """Remove a dead writer's file (its turns have just been recovered)."""
    try:
        (directory / f"{token}.lock").unlink(missing_ok=True)
    except OSError:
        pass


def sweep_stale(directory: Path, now: float | None = None) -> None:
    """Delete lock files of writers that died between turns.

    Only old files are considered, so a file a new writer has just created but not yet
    locked is never taken for a dead one.
    """
    if not directory.is_dir():
        return
    cutoff = (time.time() if now is None else now) - STALE_LOCK_AGE_S
    for path in directory.glob("*.lock"):
        try:
            if path.stat().st_mtime < cutoff and not writer_alive(directory, path.stem):
                os.remove(path)
        except OSError as exc:
            log.debug("could not sweep %s: %s", path, exc)
