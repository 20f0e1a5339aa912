"""How fast an index run goes and how long it has left, from its own recent progress.

    pace = Pace()
    pace.note(passages=120, done_bytes=3 << 20, total_bytes=40 << 20)
    pace_words(pace.passages_per_s(), pace.seconds_left())  # "14.2 passages/s · about 4 min left"

Both figures come from the last `WINDOW_S` seconds, not the whole run: files left unchanged go
by in an instant at the start, and a reply streaming in the window slows the embedder for a
while (`embed.reply_streaming`), so the rate now says more than the average. Time left is the
bytes still to read at the recent bytes per second (the passages a file will give are unknown
until it is read); it is said only once a file is done and a few seconds have passed.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

WINDOW_S = 20.0  # the recent past the figures are taken over
SETTLE_S = 2.0  # no figure before this much of the run (the first batch alone says little)


class Pace:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._start = clock()
        self._samples: deque[tuple[float, int, int]] = deque()  # (time, passages, bytes done)
        self._total_bytes = 0
        self._first: tuple[float, int, int] | None = None

    def note(self, passages: int, done_bytes: int, total_bytes: int) -> None:
        now = self._clock()
        self._samples.append((now, passages, done_bytes))
        self._first = self._first or self._samples[0]
        self._total_bytes = total_bytes
        while len(self._samples) > 2 and now - self._samples[1][0] >= WINDOW_S:
            self._samples.popleft()  # one sample older than the window stays: the span covers it

    def passages_per_s(self) -> float | None:
        span = self._span()
        if span is None:
            return None
        p0, p1 = self._samples[0][1], self._samples[-1][1]
        return (p1 - p0) / span if p1 > p0 else None

    def seconds_left(self) -> float | None:
        span = self._span()
        if span is None:
            return None
        t1, _, b1 = self._samples[-1]
        t0, _, b0 = self._samples[0]
        if b1 <= b0:  # no file finished lately (one large file): the whole run's rate
            t0, _, b0 = self._first or self._samples[0]
            span = t1 - t0
        if b1 <= b0 or span <= 0 or self._total_bytes <= b1:
            return None
        return (self._total_bytes - b1) / ((b1 - b0) / span)

    def _span(self) -> float | None:
        if len(self._samples) < 2 or self._clock() - self._start < SETTLE_S:
            return None
        span = self._samples[-1][0] - self._samples[0][0]
        return span if span > 0 else None


def pace_words(passages_per_s: float | None, seconds_left: float | None) -> str:
    """ "14.2 passages/s · about 4 min left"; either part, or "" while too early to say."""
    parts: list[str] = []
    if passages_per_s is not None:
        digits = 1 if passages_per_s < 100 else 0
        parts.append(f"{passages_per_s:,.{digits}f} passages/s")
    if seconds_left is not None:
        parts.append(f"about {duration(seconds_left)} left")
    return " · ".join(parts)


def duration(seconds: float) -> str:
    """ "40 s", "3 min", "1 h 5 min": rounded as a person says it (an estimate, not a timer)."""
    if seconds < 55:
        return f"{max(5, round(seconds / 5) * 5)} s"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60} min" if minutes % 60 else f"{minutes // 60} h"
