"""Prometheus metrics of one process, for `GET /metrics` (docs/operations.md#metrics).

Counters the code moves (submissions, delivery attempts, the submit's duration) and gauges
read when scraped: deliveries by status and the oldest due delivery, from the database at
most every GAUGE_SECONDS per scraper, and the pool's connections. Off until a process that
serves them turns them on (`enable`: `postbag serve`, `postbag dev`, `postbag worker
--metrics-port`): the cloud functions count nothing and never import prometheus_client,
which stays off their cold start. No label ever holds an organization, form, destination
or any other id: the label values are the fixed words below and the destination types.

`postbag serve --workers N` runs N processes behind one port, and a scrape reaches one of
them: the server points PROMETHEUS_MULTIPROC_DIR at a directory of its own before it starts
them, each process keeps its values in files there, and every scrape answers the sum of
all of them (the database's gauges: the most recent reading; the pool: the sum over the
live processes, each refreshing its own every POOL_SECONDS).
"""

from __future__ import annotations

import asyncio
import os
import time
from datetime import datetime
from typing import TYPE_CHECKING, get_args

from core.platform.errors import Unavailable
from core.platform.health import check_health
from core.platform.logs import log
from core.platform.queries import queries
from core.platform.vocabulary import DeliveryStatus, SubmissionStatus

if TYPE_CHECKING:
    from core.platform.db import Database

# How long the database's gauges are kept before a scrape reads them again.
GAUGE_SECONDS = 5.0
# How often each process of a multi-process server records its pool's connections.
POOL_SECONDS = 1.0
# prometheus_client's switch to values kept in files shared by the processes of one server.
MULTIPROCESS_DIRECTORY = "PROMETHEUS_MULTIPROC_DIR"
# The submit's duration, from 5 ms (a kept form, no files) to 10 s (a slow Turnstile).
SUBMIT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
# What a submit's answer counts as, beyond the statuses it stores: a repeat of an earlier
# submission (`duplicate`) and a refusal (a problem answer, nothing stored).
SUBMIT_OUTCOMES = (*get_args(SubmissionStatus), "duplicate", "refused")


class _Registry:
    """The process's metrics, built once by `enable`."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = CollectorRegistry(auto_describe=True)
        self.submissions = Counter(
            "postbag_submissions",
            "Submit requests answered, by status (stored status, duplicate or refused).",
            ["status"],
            registry=self.registry,
        )
        for status in SUBMIT_OUTCOMES:
            self.submissions.labels(status=status)
        self.attempts = Counter(
            "postbag_delivery_attempts",
            "Sends attempted by this process, by destination type and outcome.",
            ["channel", "outcome"],
            registry=self.registry,
        )
        self.submit_seconds = Histogram(
            "postbag_submit_duration_seconds",
            "Time from a submit request's arrival to its answer (the wake-up after excluded).",
            buckets=SUBMIT_BUCKETS,
            registry=self.registry,
        )
        self.deliveries = Gauge(
            "postbag_deliveries",
            f"Deliveries in the database by status (read at most every {GAUGE_SECONDS:g} s).",
            ["status"],
            registry=self.registry,
            multiprocess_mode="mostrecent",
        )
        self.oldest_due = Gauge(
            "postbag_oldest_due_delivery_seconds",
            "Age of the oldest due delivery of a destination with no send in flight (0: none).",
            registry=self.registry,
            multiprocess_mode="mostrecent",
        )
        self.pool = Gauge(
            "postbag_db_pool_connections",
            "The database pool: connections idle and in use, requests waiting for one.",
            ["state"],
            registry=self.registry,
            multiprocess_mode="livesum",
        )

    def record_pool(self, db: Database) -> None:
        for state, count in db.connection_counts().items():
            self.pool.labels(state=state).set(count)

    def exposition(self) -> bytes:
        from prometheus_client import CollectorRegistry, generate_latest

        if not os.environ.get(MULTIPROCESS_DIRECTORY):
            return generate_latest(self.registry)
        from prometheus_client.multiprocess import MultiProcessCollector

        everyone = CollectorRegistry()
        MultiProcessCollector(everyone)  # type: ignore[no-untyped-call]
        return generate_latest(everyone)


_metrics: _Registry | None = None


def enable() -> None:
    """Turn this process's metrics on (idempotent)."""
    global _metrics
    if _metrics is None:
        _metrics = _Registry()


async def record_pool_while_serving(db: Database) -> None:
    """In a process of a multi-process server, record the pool's connections every
    POOL_SECONDS until cancelled (a scrape reaches another process)."""
    if _metrics is None or not os.environ.get(MULTIPROCESS_DIRECTORY):
        return
    while True:
        _metrics.record_pool(db)
        await asyncio.sleep(POOL_SECONDS)


def process_stopped() -> None:
    """Drop this process's live values from a multi-process server's sums."""
    if _metrics is not None and os.environ.get(MULTIPROCESS_DIRECTORY):
        from prometheus_client.multiprocess import mark_process_dead

        mark_process_dead(os.getpid())  # type: ignore[no-untyped-call]


def count_submission(status: str, seconds: float) -> None:
    """One submit answered with `status` (one of SUBMIT_OUTCOMES) after `seconds`."""
    if _metrics is not None:
        _metrics.submissions.labels(status=status).inc()
        _metrics.submit_seconds.observe(seconds)


def count_attempt(channel: str, outcome: str) -> None:
    """One send to a destination of type `channel`, recorded with `outcome`."""
    if _metrics is not None:
        _metrics.attempts.labels(channel=channel, outcome=outcome).inc()


class Scrape:
    """What one `/metrics` endpoint serves: the process's metrics, its pool's connections
    and the database's gauges, read again once they are GAUGE_SECONDS old."""

    def __init__(self, db: Database) -> None:
        enable()
        self._db = db
        self._read_at = float("-inf")
        self._lock = asyncio.Lock()

    async def render(self, *, now: datetime) -> bytes:
        """The Prometheus text exposition."""
        assert _metrics is not None
        async with self._lock:
            if time.monotonic() - self._read_at >= GAUGE_SECONDS:
                await self._read_database(_metrics, now)
        _metrics.record_pool(self._db)
        return _metrics.exposition()

    async def _read_database(self, metrics: _Registry, now: datetime) -> None:
        try:
            async with self._db.connection() as conn:
                cur = await conn.execute(queries["deliveries_by_status"], {})
                counts = {row["status"]: row["count"] for row in await cur.fetchall()}
        except Unavailable:
            # The gauges keep their last values; the counters are still served.
            log.warning("metrics: the database is unavailable")
            return
        for status in get_args(DeliveryStatus):
            metrics.deliveries.labels(status=status).set(counts.get(status, 0))
        health = await check_health(self._db, now=now)
        metrics.oldest_due.set(health.oldest_due_delivery_age_seconds or 0)
        self._read_at = time.monotonic()
