"""What an HTTP answer means for a delivery (core/destinations/http.py): pure rules."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from core.destinations.http import Verdict, classify_status, parse_retry_after

NOW = datetime(2026, 10, 13, 9, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    ("status", "verdict"),
    [
        (200, Verdict.SENT),
        (204, Verdict.SENT),
        (299, Verdict.SENT),
        (301, Verdict.DEAD),
        (302, Verdict.DEAD),
        (304, Verdict.DEAD),
        (400, Verdict.DEAD),
        (401, Verdict.DEAD),
        (404, Verdict.DEAD),
        (410, Verdict.DEAD),
        (408, Verdict.RETRY),
        (429, Verdict.RETRY),
        (500, Verdict.RETRY),
        (503, Verdict.RETRY),
        (599, Verdict.RETRY),
        (100, Verdict.DEAD),
    ],
)
def test_classify_status(status: int, verdict: Verdict) -> None:
    assert classify_status(status) is verdict


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("120", 120.0),
        (" 0 ", 0.0),
        ("99999999", 99999999.0),
        (format_datetime(NOW + timedelta(minutes=5), usegmt=True), 300.0),
        (format_datetime(NOW + timedelta(days=2), usegmt=True), 2 * 86400.0),
        (format_datetime(NOW - timedelta(minutes=5), usegmt=True), None),
        ("-5", None),
        ("1.5", None),
        ("soon", None),
        ("", None),
        (None, None),
    ],
)
def test_parse_retry_after(header: str | None, seconds: float | None) -> None:
    assert parse_retry_after(header, now=NOW) == seconds
