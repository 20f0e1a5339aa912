"""A thread of its own for a session's history work, so an event loop never waits on the disk.

The window's session does every read and write of the store here (`ChatSession.io`): the
branch before and after a turn, the recorded events, the sidebar's pages and searches. One
thread keeps them in the order they were asked for; the store's lock keeps the few calls
still made on the GUI thread (a rename, a setting) from interleaving with them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")


class HistoryThread:
    """Runs history calls one after another on the `ember-history` thread."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ember-history")

    async def call(self, fn: Callable[[], T]) -> T:
        """`fn()` on the history thread; its result (or its exception) back on the loop."""
        return await asyncio.wrap_future(self._pool.submit(fn))

    def close(self) -> None:
        """Finish what was asked (a turn's last record) and end the thread."""
        self._pool.shutdown(wait=True)
