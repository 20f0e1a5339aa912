"""The sidebar's date groups, by calendar day in a fixed zone: midnight, a week, a month, a year."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from desktop.qt.history.date_groups import date_group, with_headers

NOW = datetime(2026, 12, 3, 9, 30, tzinfo=UTC)  # a Thursday morning


def group(moment: datetime, now: datetime = NOW) -> str:
    return date_group(moment.timestamp(), now.timestamp(), UTC)


def test_today_runs_from_midnight() -> None:
    assert group(NOW) == "Today"
    assert group(datetime(2026, 12, 3, 0, 0, tzinfo=UTC)) == "Today"
    assert group(datetime(2026, 12, 2, 23, 59, 59, tzinfo=UTC)) == "Yesterday"  # one second before midnight


def test_yesterday_is_the_calendar_day_not_24_hours() -> None:
    just_after_midnight = datetime(2026, 12, 3, 0, 10, tzinfo=UTC)
    assert group(datetime(2026, 12, 2, 23, 50, tzinfo=UTC), just_after_midnight) == "Yesterday"  # 20 minutes ago
    assert group(datetime(2026, 12, 2, 0, 0, tzinfo=UTC)) == "Yesterday"
    assert group(datetime(2026, 12, 1, 23, 59, tzinfo=UTC)) == "Previous 7 days"


def test_previous_7_then_30_days() -> None:
    assert group(NOW - timedelta(days=7)) == "Previous 7 days"
    assert group(NOW - timedelta(days=8)) == "Previous 30 days"
    assert group(NOW - timedelta(days=30)) == "Previous 30 days"


def test_older_goes_by_month_with_the_year_only_when_not_this_year() -> None:
    assert group(NOW - timedelta(days=31)) == "November"  # 2 November
    assert group(datetime(2026, 1, 15, tzinfo=UTC)) == "January"
    assert group(datetime(2025, 12, 31, 23, 0, tzinfo=UTC)) == "December 2025"
    new_year = datetime(2027, 1, 2, 12, 0, tzinfo=UTC)
    assert group(datetime(2026, 12, 31, 12, 0, tzinfo=UTC), new_year) == "Previous 7 days"
    assert group(datetime(2026, 11, 20, tzinfo=UTC), new_year) == "November 2026"  # last year now


def test_the_zone_decides_the_day() -> None:
    late = datetime(2026, 12, 2, 23, 0, tzinfo=UTC)  # yesterday in London, today in Berlin
    assert date_group(late.timestamp(), NOW.timestamp(), UTC) == "Yesterday"
    assert date_group(late.timestamp(), NOW.timestamp(), timezone(timedelta(hours=2))) == "Today"


def test_a_clock_ahead_reads_today_and_a_bad_stamp_does_not_raise() -> None:
    assert group(NOW + timedelta(days=3)) == "Today"
    assert date_group(float("nan"), NOW.timestamp(), UTC) == "January 1970"


def test_headers_go_before_each_group_once_and_a_next_page_continues_without_one() -> None:
    stamps = [NOW - timedelta(hours=1), NOW - timedelta(hours=2), NOW - timedelta(days=1), NOW - timedelta(days=40)]
    items = [s.timestamp() for s in stamps]
    shown = with_headers(items[:2], float, NOW.timestamp(), tz=UTC)
    assert shown == ["Today", items[0], items[1]]
    page = with_headers(items[2:], float, NOW.timestamp(), after="Today", tz=UTC)
    assert page == ["Yesterday", items[2], "October", items[3]]
    assert with_headers([items[1]], float, NOW.timestamp(), after="Today", tz=UTC) == [items[1]]
