from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

from core.platform.clock import iso_ms, month_of

PLUS_TWO = timezone(timedelta(hours=2))
MINUS_FIVE = timezone(timedelta(hours=-5))


def test_month_of__first_day_of_the_month() -> None:
    assert month_of(datetime(2026, 10, 13, 9, 30, tzinfo=UTC)) == date(2026, 10, 1)


def test_month_of__an_aware_time_near_a_boundary_counts_in_its_utc_month() -> None:
    # 00:30 on 1 November at UTC+2 is still 31 October in UTC.
    assert month_of(datetime(2026, 11, 1, 0, 30, tzinfo=PLUS_TWO)) == date(2026, 10, 1)
    # 20:00 on 31 December at UTC-5 is already the new year in UTC.
    assert month_of(datetime(2026, 12, 31, 20, 0, tzinfo=MINUS_FIVE)) == date(2027, 1, 1)


def test_iso_ms__truncates_to_milliseconds_with_z() -> None:
    late = datetime(2026, 10, 13, 9, 30, 0, 999_999, tzinfo=UTC)
    assert iso_ms(late) == "2026-10-13T09:30:00.999Z"
    assert iso_ms(datetime(2026, 10, 13, 9, 30, tzinfo=UTC)) == "2026-10-13T09:30:00.000Z"


def test_iso_ms__writes_an_aware_time_in_utc() -> None:
    at = datetime(2026, 10, 13, 11, 30, 5, 123_456, tzinfo=PLUS_TWO)
    assert iso_ms(at) == "2026-10-13T09:30:05.123Z"
