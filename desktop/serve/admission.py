"""One model, many clients: a bounded first-come-first-served line in front of the engine.

At most one API request holds the model; up to `max_waiting` more wait in arrival order.
One more is refused at once (`QueueFull`, a 429 with Retry-After): a client learns to come
back instead of hanging, and the server never holds more than the line. A waiter that
goes away (its client disconnected) leaves the line without taking the model.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque

DEFAULT_MAX_WAITING = 32
_SMOOTHING = 0.3  # weight of the newest request in the moving average of service time


class QueueFull(Exception):
    def __init__(self, retry_after_s: int) -> None:
        super().__init__(f"the server is busy; retry in {retry_after_s} s")
        self.retry_after_s = retry_after_s


class ModelLine:
    """A FIFO gate: `await acquire()` … `release()`; one holder at a time. Loop-bound (one event loop)."""

    def __init__(self, max_waiting: int = DEFAULT_MAX_WAITING) -> None:
        self.max_waiting = max_waiting
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._held = False
        self._since = 0.0
        self._mean_s = 1.0  # a guess until the first request has been served
        self.served = 0  # requests that held the model (the window shows the count)
        self.refused = 0

    @property
    def waiting(self) -> int:
        return sum(not f.done() for f in self._waiters)

    @property
    def busy(self) -> bool:
        return self._held

    def retry_after(self) -> int:
        """Seconds a refused client should wait: the line ahead of it at the recent pace (1 to 60)."""
        return max(1, min(60, math.ceil(self._mean_s * (self.waiting + 1))))

    async def acquire(self) -> None:
        """Wait for the model in arrival order; raises QueueFull when the line is full."""
        if not self._held and not self.waiting:
            self._take()
            return
        if self.waiting >= self.max_waiting:
            self.refused += 1
            raise QueueFull(self.retry_after())
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(future)
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.release()  # the model was handed over just as the waiter left: pass it on
            raise
        finally:
            if future in self._waiters:
                self._waiters.remove(future)

    def release(self) -> None:
        """Give the model to the next waiter, if any."""
        elapsed = time.monotonic() - self._since
        self._mean_s = (1 - _SMOOTHING) * self._mean_s + _SMOOTHING * elapsed
        while self._waiters:
            future = self._waiters.popleft()
            if not future.done():
                future.set_result(None)
                self._take()
                return
        self._held = False

    def _take(self) -> None:
        self._held = True
        self._since = time.monotonic()
        self.served += 1
