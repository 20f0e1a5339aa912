"""A thread of its own for a session's history work, so an event loop never waits on the disk.

The window's session does every read and write of the store here (`ChatSession.io`): the
branch before and after a turn, the recorded events, the sidebar's pages and searches. One
thread keeps them in the order they were asked for; the store's lock keeps the few calls
still made on the GUI thread (a rename, a setting) from interleaving with them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

from engine.history.types import HistoryError

log = logging.getLogger("engine.session")
T = TypeVar("T")


class HistoryThread:
    """Runs history calls one after another on the `ember-history` thread."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ember-history")
        self._closed = False

    async def call(self, fn: Callable[[], T]) -> T:
        """`fn()` on the history thread; its result (or its exception) back on the loop.

        HistoryError once the session closed (a read that arrives as the window closes).
        """
        self._check_open()
        return await asyncio.wrap_future(self._pool.submit(_dropped_by_loop(fn, asyncio.get_running_loop())))

    def submit(self, fn: Callable[[], object]) -> None:
        """`fn()` on the history thread, not waited for; a failure is logged (the recorder logs its own)."""
        self._check_open()
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:  # called from no loop (a script, a test): nothing to hand back to
            loop = None
        job = fn if loop is None else _dropped_by_loop(fn, loop)
        self._pool.submit(job).add_done_callback(_log_failure)

    def _check_open(self) -> None:
        if self._closed:
            raise HistoryError("the history is closed")

    def close(self) -> None:
        """Finish what was asked (a turn's last record) and end the thread."""
        self._closed = True
        self._pool.shutdown(wait=True)


def _dropped_by_loop(fn: Callable[[], T], loop: asyncio.AbstractEventLoop) -> Callable[[], T]:
    """`fn` for the worker, whose last reference is dropped on the loop's thread, not the worker's.

    What `fn` holds (a closure over a window, a Qt timer, a qasync loop) would otherwise be
    freed on this thread when the worker lets go of its job first, and a Qt object deleted off
    its own thread can crash the process ("Timers cannot be stopped from another thread").
    """
    held = [fn]

    def run() -> T:
        try:
            return held[0]()
        finally:
            try:
                loop.call_soon_threadsafe(held.clear)  # the loop's handle keeps `held` until it runs
            except RuntimeError:  # the loop is closed: nothing of it is left to crash
                held.clear()

    return run


def _log_failure(future: Future[object]) -> None:
    exc = future.exception()
    if exc is not None:
        log.error("history: a background write failed", exc_info=exc)
