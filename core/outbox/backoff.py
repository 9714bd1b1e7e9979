"""When to try a delivery again: the backoff, lengthened by the wait a service asked for
(docs/delivery.md). How an answer is classified and what wait it asks for is the
destinations' (core/destinations/http.py).

Pure functions of their arguments (randomness is passed in), so the rules are tested
without a database or a clock.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta

BASE_DELAY = 30.0
MAX_DELAY = 6 * 3600.0
JITTER = 0.2
# Failures in a row after which a destination is `failing` and only probes are sent, one
# per window: BASE_DELAY at the threshold, doubling with each failure past it, at most
# MAX_DELAY (the statement `open_probe_window` computes it from these).
STORM_THRESHOLD = 5


def backoff_delay(attempts: int, *, rng: random.Random | None = None) -> float:
    """Seconds to wait after the `attempts`-th failed attempt: min(2^n * 30 s, 6 h) ± 20 %."""
    exponent = min(max(attempts, 0), 30)  # 2^30 * 30 s is far past the cap already
    delay: float = min(2.0**exponent * BASE_DELAY, MAX_DELAY)
    spread = (rng or random).uniform(-JITTER, JITTER)
    return delay * (1 + spread)


def retry_delay(
    attempts: int, retry_after: float | None, *, rng: random.Random | None = None
) -> float:
    """The wait before the next attempt: the backoff, lengthened by the wait a service asked
    for, capped at MAX_DELAY (the one place the cap applies to a retry)."""
    delay = backoff_delay(attempts, rng=rng)
    if retry_after is not None and retry_after > delay:
        delay = retry_after
    return min(delay, MAX_DELAY)


def next_attempt_at(
    now: datetime, attempts: int, retry_after: float | None, *, rng: random.Random | None = None
) -> datetime:
    """The time of the next attempt after the `attempts`-th failure at `now`."""
    return now + timedelta(seconds=retry_delay(attempts, retry_after, rng=rng))
