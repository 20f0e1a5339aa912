"""The sidebar's date groups: "Today", "Yesterday", "Previous 7 days", "Previous 30 days", then months.

Pure and Qt-free, so the boundaries (midnight, a month or a year turning) are tested with a
fixed `now` and time zone. Groups go by calendar days in the local zone, not by 24-hour
spans: a chat from 23:50 is "Yesterday" at 00:10.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import date, tzinfo
from typing import TypeVar

from engine.api.values import as_datetime

T = TypeVar("T")

TODAY = "Today"
YESTERDAY = "Yesterday"
PREVIOUS_7 = "Previous 7 days"
PREVIOUS_30 = "Previous 30 days"
# Fixed English names: the window is in English whatever the C library's locale says.
MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)


def date_group(ts: float, now: float, tz: tzinfo | None = None) -> str:
    """The group a conversation last active at `ts` falls in, seen at `now` (local zone when `tz` is None)."""
    return _group(as_datetime(ts, tz).date(), as_datetime(now, tz).date())


def _group(then: date, today: date) -> str:
    days = (today - then).days
    if days <= 0:  # today, or a clock that ran ahead: never a group of its own
        return TODAY
    if days == 1:
        return YESTERDAY
    if days <= 7:
        return PREVIOUS_7
    if days <= 30:
        return PREVIOUS_30
    month = MONTHS[then.month - 1]
    return month if then.year == today.year else f"{month} {then.year}"


def with_headers(
    items: Iterable[T], when: Callable[[T], float], now: float, *, after: str | None = None, tz: tzinfo | None = None
) -> list[str | T]:
    """`items` (newest first) with a group's label before its first item.

    `after`: the group the list shown so far ends in, so a next page that continues it does
    not repeat its label.
    """
    out: list[str | T] = []
    current = after
    today = as_datetime(now, tz).date()  # once, not per row: a page is hundreds of rows
    for item in items:
        group = _group(as_datetime(when(item), tz).date(), today)
        if group != current:
            out.append(group)
            current = group
        out.append(item)
    return out
