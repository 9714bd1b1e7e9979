"""Time as the rest of the code reads it: now, the usage month, and the payloads' timestamps.

Every instant is read in UTC: usage is counted per UTC calendar month, and payloads write
times with a `Z`.
"""

from __future__ import annotations

from datetime import UTC, date, datetime


def utcnow() -> datetime:
    return datetime.now(UTC)


def month_of(now: datetime) -> date:
    """The UTC calendar month `now` falls in, as its first day (the usage counters' key)."""
    return now.astimezone(UTC).date().replace(day=1)


def next_month(now: datetime) -> datetime:
    """The start (UTC midnight) of the calendar month after the one `now` falls in: when the
    month's counters start again."""
    first = month_of(now)
    following = date(first.year + first.month // 12, first.month % 12 + 1, 1)
    return datetime(following.year, following.month, 1, tzinfo=UTC)


def iso_ms(at: datetime) -> str:
    """`at` as payloads write it: UTC, milliseconds (truncated), `2026-10-13T09:30:00.000Z`."""
    at = at.astimezone(UTC)
    return at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"
