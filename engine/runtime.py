"""The asyncio face of the engine: `async for event in engine.run_turn(request)` never blocks the loop.

One worker thread owns the backend (llama.cpp objects are not thread-safe): streaming and
closing run there. A new model is built on a separate loader thread, so the current one
keeps answering while it loads; it is handed over whole, and from then on only the worker
thread touches it. Events cross back to the loop with
`call_soon_threadsafe`, so the caller's loop only ever awaits a queue.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from engine.backends.base import Backend, Request
from engine.cancel import CancelToken
from engine.errors import NoModelError
from engine.events import Event
from engine.llama import load_progress
from engine.tools.permissions import ToolUse
from engine.turns.runner import TurnRunner

log = logging.getLogger("engine.runtime")

T = TypeVar("T")
_END = object()


class _Failure:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


class Engine:
    """Owns a backend on a single worker thread and runs turns against it."""

    def __init__(self, backend: Backend | None = None) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ember-model")
        self._loader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ember-loader")
        # Token counting (the composer's meter, the context policy) runs here, beside a
        # streaming reply: it reads only the tokenizer and the template. A backend is never
        # closed while a count is using it (`_count_lock`).
        self._counter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ember-count")
        self._count_lock = threading.Lock()
        self._backend = backend
        self._running: list[CancelToken] = []  # one per turn in progress (a title may queue behind a reply)
        self._apart: list[CancelToken] = []  # turns `stop()` leaves alone (an API client's: its own cancel)

    @property
    def busy(self) -> bool:
        """True while any turn (chat, structured, a title) is queued or running."""
        return bool(self._running or self._apart)

    @property
    def backend(self) -> Backend | None:
        return self._backend

    async def measure(self, fn: Callable[[Backend], T]) -> T | None:
        """Run `fn(backend)` on the counting thread; None when no model is loaded (or it was replaced)."""
        backend = self._backend
        if backend is None:
            return None

        def work() -> T | None:
            with self._count_lock:
                return fn(backend) if backend is self._backend else None

        return await asyncio.wrap_future(self._counter.submit(work))

    def _close_after_counts(self, backend: Backend) -> None:
        with self._count_lock:
            _close_quietly(backend)

    async def load(self, factory: Callable[[], Backend], progress: Callable[[int], None] | None = None) -> Backend:
        """Build a new backend on the loader thread; the old one is closed only on success.

        A turn already streaming keeps the old backend to its end: the old backend's close is
        queued on the worker thread behind it. `progress` hears the weights' load in whole
        percents, on this loop.
        """
        reporter = None
        if progress is not None:
            loop = asyncio.get_running_loop()
            reporter = load_progress.in_percent(lambda percent: loop.call_soon_threadsafe(progress, percent))

        def build() -> Backend:
            with load_progress.reporting(reporter):
                return factory()

        new = await asyncio.wrap_future(self._loader.submit(build))
        old, self._backend = self._backend, new
        if old is not None:
            self._executor.submit(self._close_after_counts, old)
        return new

    def stop(self) -> None:
        """Stop every turn in progress, if any (not those run `apart`); each ends within one token."""
        for cancel in list(self._running):
            cancel.cancel()

    def _stop_all(self) -> None:
        self.stop()
        for cancel in list(self._apart):
            cancel.cancel()

    async def run_turn(
        self, request: Request, cancel: CancelToken | None = None, *, tools: ToolUse | None = None, apart: bool = False
    ) -> AsyncGenerator[Event, None]:
        """Run one turn of any kind on the worker thread (offering `tools`); `cancel` (else `stop()`) stops it.

        `apart`: only `cancel` (and closing the engine) stops it, not `stop()`: an API client's turn
        is not the window's Stop button's to end.
        """
        if self._backend is None:
            raise NoModelError("no model is loaded")
        runner = TurnRunner(self._backend, tools)
        cancel = cancel or CancelToken()
        turns = self._apart if apart else self._running
        turns.append(cancel)
        try:
            async for event in self._pump(lambda: runner.run(request, cancel), cancel):
                yield event
        finally:
            turns.remove(cancel)

    async def _pump(self, make_iter: Callable[[], Any], cancel: CancelToken) -> AsyncIterator[Any]:
        """Drive a sync iterator on the worker thread, yielding its items on the loop."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Any] = asyncio.Queue()

        def work() -> None:
            try:
                for item in make_iter():
                    loop.call_soon_threadsafe(queue.put_nowait, item)
            except BaseException as exc:
                loop.call_soon_threadsafe(queue.put_nowait, _Failure(exc))
            finally:
                loop.call_soon_threadsafe(queue.put_nowait, _END)

        future = asyncio.wrap_future(self._executor.submit(work))
        finished = False
        try:
            while True:
                item = await queue.get()
                if item is _END:
                    finished = True
                    break
                if isinstance(item, _Failure):
                    raise item.exc
                yield item
        finally:
            if not finished:
                cancel.cancel()  # the consumer left early: stop the worker too
            await asyncio.shield(future)

    async def aclose(self) -> None:
        """Stop any reply, close the backend on its thread and end the worker."""
        self._stop_all()
        backend, self._backend = self._backend, None
        if backend is not None:
            await asyncio.wrap_future(self._executor.submit(self._close_after_counts, backend))
        self._loader.shutdown(wait=True)
        self._counter.shutdown(wait=True)
        self._executor.shutdown(wait=True)

    def close_sync(self) -> None:
        """Blocking shutdown for code without a running loop."""
        self._stop_all()
        backend, self._backend = self._backend, None
        if backend is not None:
            self._executor.submit(self._close_after_counts, backend).result()
        self._loader.shutdown(wait=True)
        self._counter.shutdown(wait=True)
        self._executor.shutdown(wait=True)


def _close_quietly(backend: Backend) -> None:
    try:
        backend.close()
    except Exception:
        log.exception("closing the previous backend failed")
