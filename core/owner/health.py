"""A destination's health in one word, from what the last 24 hours of attempts say.

- `paused`: turned off by its owner (deliveries that come due are skipped), or paused
  itself after failing every attempt for its window (they wait: core/outbox/pauses.py).
- `failing`: the storm breaker sends it probes only, or at least MIN_ATTEMPTS attempts in
  the window and under FAILING_BELOW of them sent, or attempts and none of them sent.
- `degraded`: at least MIN_ATTEMPTS attempts and under DEGRADED_BELOW sent, or the 95th
  percentile of send durations over SLOW_P95_MS.
- `healthy`: none of these (also a destination with too few attempts to judge).

The numbers are the retention tick's 24-hour roll-up (`health_stats`), refreshed at most
every 5 minutes; the breaker's state is current.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.platform.vocabulary import HealthReading

MIN_ATTEMPTS = 5
FAILING_BELOW = 0.5
DEGRADED_BELOW = 0.95
SLOW_P95_MS = 5_000


def health_reading(row: Mapping[str, Any]) -> HealthReading:
    """The word for a destination row (`enabled`, `health`, `health_stats`)."""
    if not row["enabled"]:
        return "paused"
    stats: Mapping[str, Any] = row.get("health_stats") or {}
    judged = int(stats.get("attempts") or 0) >= MIN_ATTEMPTS
    rate = stats.get("success_rate")
    # Too few attempts to judge a share, but every one of them failed: never `healthy`.
    none_sent = int(stats.get("attempts") or 0) > 0 and rate == 0
    if (
        row["health"] == "failing"
        or none_sent
        or (judged and rate is not None and rate < FAILING_BELOW)
    ):
        return "failing"
    slow = (stats.get("p95_duration_ms") or 0) > SLOW_P95_MS
    if slow or (judged and rate is not None and rate < DEGRADED_BELOW):
        return "degraded"
    return "healthy"


def health_numbers(row: Mapping[str, Any]) -> str:
    """The roll-up the word rests on, as people read it."""
    stats: Mapping[str, Any] | None = row.get("health_stats")
    if not stats or not stats.get("attempts"):
        return "no attempts in 24 h"
    attempts = int(stats["attempts"])
    parts = [f"{attempts} attempt{'s' if attempts != 1 else ''} in 24 h"]
    if stats.get("success_rate") is not None:
        parts.append(f"{float(stats['success_rate']):.0%} sent")
    if stats.get("p95_duration_ms") is not None:
        parts.append(f"p95 {int(stats['p95_duration_ms']) / 1000:.1f} s")
    return ", ".join(parts)
