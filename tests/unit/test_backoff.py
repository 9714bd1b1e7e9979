from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from core.outbox.backoff import (
    MAX_DELAY,
    backoff_delay,
    next_attempt_at,
    retry_delay,
)

NOW = datetime(2026, 10, 13, 9, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    ("attempts", "base"),
    [(0, 30), (1, 60), (2, 120), (5, 960), (9, 15360), (10, MAX_DELAY), (60, MAX_DELAY)],
)
def test_backoff_delay__doubles_to_six_hours_with_jitter(attempts: int, base: float) -> None:
    rng = random.Random(7)
    delays = [backoff_delay(attempts, rng=rng) for _ in range(500)]
    assert min(delays) >= base * 0.8
    assert max(delays) <= base * 1.2
    assert max(delays) - min(delays) > base * 0.3  # the jitter spreads retries


def test_backoff_delay__extremes_of_the_jitter() -> None:
    class Edge(random.Random):
        def __init__(self, value: float) -> None:
            super().__init__()
            self.value = value

        def uniform(self, a: float, b: float) -> float:
            return a if self.value < 0 else b

    assert backoff_delay(1, rng=Edge(-1)) == pytest.approx(48)
    assert backoff_delay(1, rng=Edge(1)) == pytest.approx(72)


def test_retry_delay__retry_after_lengthens_never_shortens_capped() -> None:
    rng = random.Random(1)
    assert retry_delay(1, 3600, rng=rng) == 3600
    assert 48 <= retry_delay(1, 5, rng=rng) <= 72
    assert retry_delay(1, 10 * 3600, rng=rng) == MAX_DELAY
    assert retry_delay(20, None, rng=rng) <= MAX_DELAY


def test_next_attempt_at() -> None:
    due = next_attempt_at(NOW, 2, None, rng=random.Random(3))
    assert NOW + timedelta(seconds=96) <= due <= NOW + timedelta(seconds=144)
