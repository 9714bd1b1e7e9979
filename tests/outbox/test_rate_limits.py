"""Per-destination rate limits (docs/delivery.md#rate-limits): one token bucket per
destination in its row, spent by every worker's claim; a 429 lowers the rate for all.

Arrival times are the receiver's (`time.monotonic()` as each request arrives)."""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest

from core.outbox import rates
from core.outbox import store as outbox
from core.outbox.worker import Deliverer, WorkerOptions
from core.platform.clock import utcnow
from core.platform.db import Conn, connect
from core.platform.services import Services
from core.ticks.worker import Worker
from tests.support.api import api_client
from tests.support.builders import Tenant, make_deliveries, make_route_to, setup_form
from tests.support.cli import spawn, subprocess_env, terminate
from tests.support.peers import Answer, Request, receiver
from tests.support.records import rows
from tests.support.settings import TEST_SECRET_KEY

LEASE = timedelta(minutes=5)


class Arrivals:
    """A receiver's answers: `answer(n)` for the n-th request (from 1), each arrival timed."""

    def __init__(self, answer: dict[int, Answer] | None = None) -> None:
        self.times: list[float] = []
        self.answer = answer or {}
        self.lock = threading.Lock()

    def __call__(self, _request: Request) -> Answer:
        with self.lock:
            self.times.append(time.monotonic())
            n = len(self.times)
        return self.answer.get(n, (200, {}, b"ok"))


def most_within_one_second(times: list[float]) -> int:
    """The most arrivals any one-second window [t, t + 1) holds."""
    ordered = sorted(times)
    return max(sum(1 for u in ordered if t <= u < t + 1) for t in ordered)


async def _limited(conn: Conn, url: str, count: int, per_second: float) -> tuple[Tenant, str]:
    """A webhook destination at `per_second`, with `count` deliveries due to it now; returns
    its organization and its id."""
    tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
    dst, rte = await make_route_to(conn, tenant, form, config={"url": url})
    await conn.execute(
        "UPDATE destinations SET rate_per_second = %(rate)s WHERE id = %(id)s",
        {"rate": per_second, "id": dst},
    )
    await make_deliveries(conn, tenant, form, dst, rte, count=count, url=url, due=utcnow())
    return tenant, dst


async def test_rate_limit__racing_claims_share_one_bucket_and_pass_over_no_one_else(
    db_url: str, conn: Conn
) -> None:
    _, limited = await _limited(conn, "https://example.com/slow", 10, per_second=1)
    tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
    free, rte = await make_route_to(conn, tenant, form, config={"url": "https://example.com/a"})
    now = utcnow()
    await make_deliveries(conn, tenant, form, free, rte, count=5, url="https://x", due=now)
    others = [await connect(db_url) for _ in range(6)]
    try:
        racing = await asyncio.gather(
            *(outbox.claim_due(c, now=now, limit=3, lease=LEASE) for c in others)
        )
    finally:
        for other in others:
            await other.close()
    taken = [claim.destination_id for claims in racing for claim in claims]
    # The bucket of a rate of 1 holds one token, spent once whoever races for it.
    assert taken.count(limited) == 1
    assert len({claim.id for claims in racing for claim in claims}) == len(taken)
    # A millisecond late, so that the token is whole by then.
    assert await rates.next_token_at(conn, now=now, since=now) == now + timedelta(seconds=1.001)
    # Until its next token the limited destination is passed over; the other is not.
    rest = await outbox.claim_due(conn, now=now + timedelta(seconds=0.9), limit=10, lease=LEASE)
    assert [claim.destination_id for claim in rest] == [free] * (5 - taken.count(free))
    later = await outbox.claim_due(conn, now=now + timedelta(seconds=3), limit=10, lease=LEASE)
    assert [claim.destination_id for claim in later] == [limited]  # one second's worth at most


@pytest.mark.slow
async def test_rate_limit__two_worker_processes_hold_two_a_second_together(
    db_url: str, conn: Conn, tmp_path: Path
) -> None:
    arrivals = Arrivals()
    env = subprocess_env(
        POSTBAG_DATABASE_URL=db_url,
        POSTBAG_SECRET_KEY=TEST_SECRET_KEY,
        POSTBAG_STORAGE_URL=f"file://{tmp_path / 'files'}",
        POSTBAG_ALLOW_PRIVATE_TARGETS="true",  # the receiver is on loopback
    )
    with receiver(arrivals) as peer:
        workers = [spawn("worker", "--ticks", "deliver", env=env) for _ in range(2)]
        try:
            deadline = time.monotonic() + 60
            while len(await rows(conn, "SELECT 1 FROM worker_heartbeats")) < 2:
                assert time.monotonic() < deadline, "the workers never started"
                await asyncio.sleep(0.1)
            await _limited(conn, peer.url, 12, per_second=2)
            await conn.execute("SELECT pg_notify('postbag_deliveries', '')")
            while len(arrivals.times) < 12:
                assert time.monotonic() < deadline + 30, f"{len(arrivals.times)} of 12 arrived"
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.6)  # one more would arrive now
        finally:
            stopped = [terminate(worker) for worker in workers]
    assert [code for code, _, _ in stopped] == [0, 0], [out for _, out, _ in stopped]
    times = sorted(arrivals.times)
    assert len(times) == 12
    # Two at once (the bucket holds one second's sends), then one every half second: any
    # one second holds at most 2 + that burst of 2, and the twelve take about 5 s. Each
    # process holding 2 a second of its own would send them in about half that.
    assert most_within_one_second(times) <= 4, times
    assert times[-1] - times[0] >= 4.5, times
    sent = await rows(conn, "SELECT status, attempts FROM deliveries")
    assert {(row["status"], row["attempts"]) for row in sent} == {("sent", 1)}


@pytest.mark.parametrize("retry_after", [None, "2"], ids=["no_retry_after", "retry_after_2s"])
async def test_rate_limit__a_429_halves_it_for_a_while(
    services: Services, conn: Conn, retry_after: str | None
) -> None:
    headers = {} if retry_after is None else {"Retry-After": retry_after}
    arrivals = Arrivals({3: (429, headers, b"slow down")})
    worker = Worker(services, name="worker@test", ticks=["deliver"])
    with receiver(arrivals) as peer:
        tenant, dst = await _limited(conn, peer.url, 10, per_second=4)
        task = asyncio.create_task(worker.run())
        try:
            deadline = time.monotonic() + 30
            while len(arrivals.times) < 10:
                assert time.monotonic() < deadline, f"{len(arrivals.times)} of 10 arrived"
                await asyncio.sleep(0.05)
        finally:
            worker.stop.set()
            await asyncio.wait_for(task, 30)
    async with api_client(services) as client:
        read = await client.get(f"/v1/destinations/{dst}", headers=tenant.headers)
    # The first four at once (a bucket of 4), the third of them answered 429: the rate is
    # 2 a second from then on (the other six take 2.5 s; 1.25 s at the full rate), and
    # after a `Retry-After` nothing is sent before it ends. Timed by the attempts: a send
    # already under way when the 429 came back (on a busy machine, a token refilled before
    # it) is not held back; every send begun after it is.
    attempts = await rows(
        conn, "SELECT started_at, duration_ms, http_status FROM delivery_attempts ORDER BY id"
    )
    told = next(a for a in attempts if a["http_status"] == 429)
    told_at = told["started_at"] + timedelta(milliseconds=told["duration_ms"])
    later = sorted(a["started_at"] for a in attempts if a["started_at"] > told_at)
    first_wait = 2.0 if retry_after else 0.5
    assert len(later) >= 5, attempts
    assert (later[0] - told_at).total_seconds() >= first_wait - 0.05, attempts
    assert (later[-1] - later[0]).total_seconds() >= 0.5 * (len(later) - 1) - 0.3, attempts
    # Shared through the database, as every worker's claim reads it; shown in the answer.
    assert read.json()["rate_limit"] == {
        "per_second": 4,
        "default": False,
        "current_per_second": 2,
    }


async def test_rate_limit__an_empty_bucket_with_nothing_due_keeps_no_pass_waiting(
    services: Services, conn: Conn
) -> None:
    arrivals = Arrivals()
    with receiver(arrivals) as peer:
        _, dst = await _limited(conn, peer.url, 1, per_second=0.25)
        started = time.monotonic()
        # A budget that leaves room for more claims (a pass claims while a send started now
        # could end within it).
        await Deliverer(services, options=WorkerOptions(timeout=2)).run_pass(
            now=utcnow(), budget=30
        )
        took = time.monotonic() - started
    [bucket] = await rows(conn, "SELECT rate_next_at FROM destinations WHERE id = %(id)s", id=dst)
    assert len(arrivals.times) == 1
    # The send emptied the bucket (its next token 4 s on), and nothing else is due to it:
    # the pass ends with its send instead of waiting for that token.
    assert bucket["rate_next_at"] is not None
    assert (bucket["rate_next_at"] - utcnow()).total_seconds() > 1
    assert took < 2, took
