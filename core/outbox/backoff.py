"""When to try a delivery again: classification, backoff and `Retry-After` (docs/delivery.md).

Pure functions of their arguments (time and randomness are passed in), so the rules are
tested without a database or a clock.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from enum import Enum

BASE_DELAY = 30.0
MAX_DELAY = 6 * 3600.0
JITTER = 0.2
# Failures in a row after which a destination is `failing` and only probes are sent.
STORM_THRESHOLD = 5


class Verdict(Enum):
    """What an HTTP status means for a delivery."""

    SENT = "sent"
    RETRY = "retry"
    DEAD = "dead"


def classify_status(status: int) -> Verdict:
    """2xx sent; 408, 429 and 5xx retried; anything else (3xx included) dead at once."""
    if 200 <= status < 300:
        return Verdict.SENT
    if status in (408, 429) or 500 <= status < 600:
        return Verdict.RETRY
    return Verdict.DEAD


def backoff_delay(attempts: int, *, rng: random.Random | None = None) -> float:
    """Seconds to wait after the `attempts`-th failed attempt: min(2^n * 30 s, 6 h) ± 20 %."""
    exponent = min(max(attempts, 0), 30)  # 2^30 * 30 s is far past the cap already
    delay: float = min(2.0**exponent * BASE_DELAY, MAX_DELAY)
    spread = (rng or random).uniform(-JITTER, JITTER)
    return delay * (1 + spread)


def retry_delay(
    attempts: int, retry_after: float | None, *, rng: random.Random | None = None
) -> float:
    """The wait before the next attempt: the backoff, lengthened by a valid `Retry-After`."""
    delay = backoff_delay(attempts, rng=rng)
    if retry_after is not None and retry_after > delay:
        delay = retry_after
    return min(delay, MAX_DELAY)


def probe_window(consecutive_failures: int) -> float:
    """How long a failing destination waits between probes (no jitter: one probe per window)."""
    window: float = min(
        2.0 ** max(consecutive_failures - STORM_THRESHOLD, 0) * BASE_DELAY, MAX_DELAY
    )
    return window


def parse_retry_after(value: str | None, *, now: datetime) -> float | None:
    """Seconds a `Retry-After` header asks for (delta-seconds or an HTTP date), capped at 6 h.

    A missing, malformed, negative or past value is None: the normal backoff applies.
    """
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    if value.isdigit():
        return min(float(value), MAX_DELAY)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    seconds = (when - now).total_seconds()
    if seconds <= 0:
        return None
    return min(seconds, MAX_DELAY)


def next_attempt_at(
    now: datetime, attempts: int, retry_after: float | None, *, rng: random.Random | None = None
) -> datetime:
    """The time of the next attempt after the `attempts`-th failure at `now`."""
    return now + timedelta(seconds=retry_delay(attempts, retry_after, rng=rng))
