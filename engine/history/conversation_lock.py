"""One writer per conversation at a time, across processes.

Two `ember chat -c` started together would each attach their question to the same leaf
(or to each other's unanswered question), so the stored thread would no longer be what
either model was given. A turn therefore holds an exclusive OS lock on
`<db>.conversations/<id>.lock` from before it reads the branch until its answer is stored;
a second writer waits for it (and then sees the first turn's answer in its context). The
OS drops the lock when a process dies, however it dies.

    with ConversationLock(db_path, conversation_id, on_wait=tell_user):
        ...  # begin the turn, stream it, store the answer
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import IO

from engine.history.lock import try_lock
from engine.history.types import HistoryError

POLL_S = 0.05
DEFAULT_WAIT_S = 15 * 60.0  # a reply longer than this is stuck; the waiter gives up


class ConversationBusy(HistoryError):
    """Another writer held the conversation for longer than the wait allowed."""


class ConversationLock:
    """Exclusive right to add turns to one conversation (a context manager)."""

    def __init__(
        self,
        db_path: Path,
        conversation_id: int,
        *,
        wait_s: float = DEFAULT_WAIT_S,
        on_wait: Callable[[], None] | None = None,
    ) -> None:
        directory = db_path.with_name(db_path.name + ".conversations")
        self.path = directory / f"{conversation_id}.lock"
        self._wait_s = wait_s
        self._on_wait = on_wait
        self._handle: IO[bytes] | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(self.path, "a+b")  # kept open while held; closed on every failure below
        try:
            self._wait_for(handle)
        except BaseException:
            handle.close()
            raise
        self._handle = handle

    def _wait_for(self, handle: IO[bytes]) -> None:
        deadline = time.monotonic() + self._wait_s
        told = False
        while not try_lock(handle):
            if not told and self._on_wait is not None:
                self._on_wait()
                told = True
            if time.monotonic() > deadline:
                raise ConversationBusy(
                    f"another reply in this conversation is still running after {self._wait_s / 60:g} minutes"
                )
            time.sleep(POLL_S)

    def release(self) -> None:
        # The file stays: deleting it could split a waiter and a newcomer onto two inodes.
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    @property
    def held(self) -> bool:
        return self._handle is not None

    def __enter__(self) -> ConversationLock:
        self.acquire()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()
