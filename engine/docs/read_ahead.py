"""An iterator run on a worker thread a few items ahead of its consumer.

The indexer reads a file on the worker while the caller chunks and writes the previous batch
to SQLite: PDFium (through ctypes) and sqlite3 both let go of the GIL, so extraction and the
database writes overlap instead of taking turns. The queue is short, so memory stays bounded;
the worker's exceptions are raised in the consumer; closing the consumer early (cancel, an
error while writing) stops the worker and closes its iterator on the worker's own thread
(PDFium is used from one thread at a time).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from engine.cancel import CancelToken

T = TypeVar("T")
_PUT_WAIT_S = 0.05  # how often a worker waiting on a full queue looks whether it was abandoned


class _Failed:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


class _Done:
    pass


class ReadAhead(Generic[T]):
    """`for item in ReadAhead(lambda stop: produce(stop))`: `produce` runs on a worker thread.

    `produce` receives a token cancelled once the consumer has gone (or `cancel` is); it should
    look at it between items that take long (a PDF page).
    """

    def __init__(
        self,
        produce: Callable[[CancelToken], Iterator[T]],
        depth: int = 4,
        name: str = "ember-read-ahead",
        cancel: CancelToken | None = None,
    ) -> None:
        self._queue: queue.Queue[T | _Failed | _Done] = queue.Queue(maxsize=depth)
        self._gone = threading.Event()  # the consumer left: nothing more is put
        self._stop = CancelToken()  # what `produce` looks at
        self._unlink = cancel.on_cancel(self._stop.cancel) if cancel is not None else (lambda: None)
        self._thread = threading.Thread(target=self._run, args=(produce,), name=name, daemon=True)
        self._thread.start()

    def _run(self, produce: Callable[[CancelToken], Iterator[T]]) -> None:
        try:
            items = produce(self._stop)
            try:
                for item in items:
                    if not self._put(item):
                        return
            finally:
                close = getattr(items, "close", None)  # a generator's `finally` runs here, on this thread
                if callable(close):
                    close()
            self._put(_Done())
        except BaseException as exc:  # handed to the consumer, raised there
            self._put(_Failed(exc))

    def _put(self, item: T | _Failed | _Done) -> bool:
        while not self._gone.is_set():
            try:
                self._queue.put(item, timeout=_PUT_WAIT_S)
                return True
            except queue.Full:
                continue
        return False

    def __iter__(self) -> Iterator[T]:
        try:
            while True:
                item = self._queue.get()
                if isinstance(item, _Done):
                    return
                if isinstance(item, _Failed):
                    raise item.exc
                yield item
        finally:
            self.close()

    def close(self) -> None:
        """Stop the worker (it ends at its next item or page) and wait for it."""
        self._gone.set()
        self._stop.cancel()
        self._unlink()
        self._thread.join()
