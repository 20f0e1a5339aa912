"""The one cancellation token: every piece of work that can be stopped takes a `CancelToken`.

A turn, a download, an index, an embedding or a file read looks at `token.cancelled` between two
pieces (or calls `token.check()`, which raises `engine.errors.Cancelled`); work blocked in I/O
registers a callback that unblocks it (`on_cancel`), or sleeps in `wait`, which wakes at once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from engine.errors import Cancelled

log = logging.getLogger(__name__)


class CancelToken:
    """A thread-safe stop flag; callbacks run once, on the thread that cancels."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], None]] = []

    def cancel(self) -> None:
        with self._lock:
            self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            _run_quietly(callback)

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def check(self) -> None:
        """Raise Cancelled if cancelled: where a piece of work stops."""
        if self._event.is_set():
            raise Cancelled

    def wait(self, timeout: float) -> bool:
        """Sleep up to `timeout` seconds, waking at once on cancel; True when cancelled."""
        return self._event.wait(timeout)

    def on_cancel(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Run `callback` when cancelled (at once if already); returns a function that unregisters it."""
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(callback)
                return lambda: self._forget(callback)
        _run_quietly(callback)
        return lambda: None

    def _forget(self, callback: Callable[[], None]) -> None:
        with self._lock:
            if callback in self._callbacks:
                self._callbacks.remove(callback)


def _run_quietly(callback: Callable[[], None]) -> None:
    try:
        callback()
    except Exception:  # a failing unblock must not break the stop itself
        log.exception("cancel callback failed")
