"""The asyncio face of the engine: `async for event in engine.chat(...)` never blocks the loop.

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
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from engine.backend import Backend, CancelToken, Message, Request, Sampling, make_request
from engine.events import Event
from engine.turn import TurnRunner

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
        self._cancel: CancelToken | None = None
        self.busy = False

    @property
    def backend(self) -> Backend | None:
        return self._backend

    async def run_in_worker(self, fn: Callable[[], T]) -> T:
        """Run `fn` on the model thread and await its result."""
        return await asyncio.wrap_future(self._executor.submit(fn))

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

    async def load(self, factory: Callable[[], Backend]) -> Backend:
        """Build a new backend on the loader thread; the old one is closed only on success.

        A turn already streaming keeps the old backend to its end: the old backend's close is
        queued on the worker thread behind it.
        """
        new = await asyncio.wrap_future(self._loader.submit(factory))
        old, self._backend = self._backend, new
        if old is not None:
            self._executor.submit(self._close_after_counts, old)
        return new

    def stop(self) -> None:
        """Stop the reply in progress, if any; it ends within one token."""
        if self._cancel is not None:
            self._cancel.cancel()

    async def chat(self, messages: Sequence[Message], *, tools: Sequence[dict[str, Any]] | None = None,
                   sampling: Sampling | None = None, max_tokens: int = 1024,
                   grammar: str | None = None) -> AsyncGenerator[Event, None]:
        request = make_request(
            list(messages), tools=tuple(tools) if tools else None, sampling=sampling or Sampling(),
            max_tokens=max_tokens, grammar=grammar,
        )
        async for event in self.run_turn(request):
            yield event

    async def run_turn(self, request: Request) -> AsyncIterator[Event]:
        if self._backend is None:
            raise RuntimeError("no model is loaded")
        runner = TurnRunner(self._backend)
        cancel = self._cancel = CancelToken()
        self.busy = True
        try:
            async for event in self._pump(lambda: runner.run(request, cancel), cancel):
                yield event
        finally:
            self.busy = False
            if self._cancel is cancel:
                self._cancel = None

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
        self.stop()
        backend, self._backend = self._backend, None
        if backend is not None:
            await self.run_in_worker(lambda: self._close_after_counts(backend))
        self._loader.shutdown(wait=True)
        self._counter.shutdown(wait=True)
        self._executor.shutdown(wait=True)

    def close_sync(self) -> None:
        """Blocking shutdown for code without a running loop."""
        self.stop()
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
