"""How far a model's load has got, for "Waiting for the model to load… 60 %".

llama.cpp reports the share of the weights read while it loads them (`progress_callback` in
its model parameters). `Engine.load` sets a reporter for the factory it runs (`reporting`);
the backend hands `current()` to the one `Llama` whose weights are the model's (not a draft
model or a projector, whose loads would start the figure again from 0).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from contextlib import contextmanager
from contextvars import ContextVar

Reporter = Callable[[float], None]  # called with 0.0 … 1.0 on the loading thread

_reporter: ContextVar[Reporter | None] = ContextVar("ember_load_progress", default=None)


@contextmanager
def reporting(reporter: Reporter | None) -> Generator[None]:
    """Loads started in this block (on this thread) report to `reporter`."""
    token = _reporter.set(reporter)
    try:
        yield
    finally:
        _reporter.reset(token)


def current() -> Reporter | None:
    return _reporter.get()


def in_percent(reporter: Callable[[int], object]) -> Reporter:
    """A reporter that passes whole percents on, each once (llama.cpp calls once per tensor)."""
    last = -1

    def report(fraction: float) -> None:
        nonlocal last
        percent = max(0, min(100, int(fraction * 100)))
        if percent != last:
            last = percent
            reporter(percent)

    return report
