"""Stored timestamps (seconds since the epoch, UTC) turned into dates that can always be shown.

`datetime` covers years 1 to 9999 only, and a local time zone can push a stamp near either end
out of it, so an imported year-1 date used to crash `history list` and the window at every
start. Imports refuse stamps outside `EARLIEST`…`LATEST`; `as_datetime` clamps anything
already stored (or arriving some other way) into that range instead of raising.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, tzinfo

EARLIEST = 0.0  # 1970-01-01 UTC: Windows' localtime cannot go earlier
LATEST = 221_845_392_000.0  # 9000-01-01 UTC


def in_range(ts: float) -> bool:
    return EARLIEST <= ts <= LATEST


def as_datetime(ts: float, tz: tzinfo | None = None) -> datetime:
    """`ts` as an aware datetime in `tz` (the local zone when None), clamped so it never raises."""
    safe = EARLIEST if not math.isfinite(ts) else min(max(ts, EARLIEST), LATEST)
    try:
        moment = datetime.fromtimestamp(safe, UTC)
        return moment.astimezone(tz) if tz is not None else moment.astimezone()
    except (ValueError, OverflowError, OSError):
        return datetime.fromtimestamp(EARLIEST, UTC)
