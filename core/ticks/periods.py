"""Digest periods in UTC: hourly `YYYY-MM-DDTHH`, daily `YYYY-MM-DD`, weekly ISO `YYYY-Www`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from core.platform.vocabulary import DigestPeriod

_LENGTH = {"hourly": timedelta(hours=1), "daily": timedelta(days=1), "weekly": timedelta(weeks=1)}


@dataclass(frozen=True, slots=True)
class Window:
    """One digest period: its key and its half-open time range [start, end)."""

    key: str
    start: datetime
    end: datetime


def window_of(period: DigestPeriod, moment: datetime) -> Window:
    """The period that contains `moment`."""
    at = moment.astimezone(UTC)
    if period == "hourly":
        start = at.replace(minute=0, second=0, microsecond=0)
        key = start.strftime("%Y-%m-%dT%H")
    elif period == "daily":
        start = at.replace(hour=0, minute=0, second=0, microsecond=0)
        key = start.strftime("%Y-%m-%d")
    else:
        day = at.replace(hour=0, minute=0, second=0, microsecond=0)
        start = day - timedelta(days=day.isoweekday() - 1)
        year, week, _ = start.isocalendar()
        key = f"{year:04d}-W{week:02d}"
    return Window(key, start, start + _LENGTH[period])


def closed_windows(period: DigestPeriod, *, since: datetime, now: datetime) -> list[Window]:
    """Every period that has closed by `now`, from the one holding `since`, oldest first."""
    windows = []
    window = window_of(period, since)
    while window.end <= now:
        windows.append(window)
        window = window_of(period, window.end)
    return windows
