from __future__ import annotations

from datetime import UTC, datetime

from core.ticks.periods import closed_windows, window_of


def test_window_of__keys_and_bounds() -> None:
    moment = datetime(2026, 12, 31, 23, 59, 59, tzinfo=UTC)
    hourly = window_of("hourly", moment)
    assert (hourly.key, hourly.start.hour, hourly.end) == (
        "2026-12-31T23",
        23,
        datetime(2027, 1, 1, tzinfo=UTC),
    )
    assert window_of("daily", moment).key == "2026-12-31"
    weekly = window_of("weekly", moment)
    # 2026-12-31 is a Thursday in ISO week 53 of 2026, which starts on Monday the 28th.
    assert (weekly.key, weekly.start) == ("2026-W53", datetime(2026, 12, 28, tzinfo=UTC))


def test_closed_windows__only_periods_that_ended_oldest_first() -> None:
    since = datetime(2026, 10, 1, 15, 0, tzinfo=UTC)
    now = datetime(2026, 10, 4, 0, 0, tzinfo=UTC)
    keys = [w.key for w in closed_windows("daily", since=since, now=now)]
    assert keys == ["2026-10-01", "2026-10-02", "2026-10-03"]
    assert closed_windows("daily", since=now, now=now) == []
