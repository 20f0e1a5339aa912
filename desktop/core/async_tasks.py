"""Starting a coroutine from a plain Qt slot, the way qasync's `asyncSlot` would.

Some slots must stay synchronous: a native file dialog runs a nested event loop, and a
nested loop inside a running asyncio task lets a second task start inside the first
("Cannot enter into task…"). Such a slot asks its question, then `spawn`s the async rest.
Like `asyncSlot`, an exception is handed to `sys.excepthook` (the app logs it; pytest-qt
fails the test), and a strong reference keeps the task alive until it ends.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Coroutine
from typing import Any

_running: set[asyncio.Future[Any]] = set()


def spawn(coro: Coroutine[Any, Any, Any]) -> asyncio.Future[Any]:
    task = asyncio.ensure_future(coro)
    _running.add(task)
    task.add_done_callback(_finished)
    return task


def _finished(task: asyncio.Future[Any]) -> None:
    _running.discard(task)
    if task.cancelled():
        return
    exc = task.exception()
    if exc is not None:
        sys.excepthook(type(exc), exc, exc.__traceback__)
