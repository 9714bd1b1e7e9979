"""Grouped outcome writes survive transient failures and cannot deadlock each other."""

from __future__ import annotations

import asyncio
import random
from datetime import timedelta

import pytest

from core.outbox import store as outbox
from core.outbox.completer import Completer
from core.platform.clock import utcnow
from core.platform.db import Conn, connect
from core.platform.services import Services
from tests.support.builders import make_deliveries, make_delivery, make_route_to, setup_form
from tests.support.records import attempts, delivery, rows

URL = "http://127.0.0.1:9/"


async def _claimed(conn: Conn, count: int) -> list[outbox.Claim]:
    tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
    dst, rte = await make_route_to(conn, tenant, form, config={"url": URL})
    for _ in range(count):
        await make_delivery(conn, tenant, form, dst, rte, target={"url": URL})
    claims = await outbox.claim_due(
        conn, now=utcnow(), limit=count, lease=timedelta(minutes=5), per_destination=count
    )
    assert len(claims) == count
    return sorted(claims, key=lambda claim: claim.id)


def _sent(claim: outbox.Claim) -> outbox.Outcome:
    now = utcnow()
    return outbox.Outcome(
        claim, now, "sent", None, "sent", attempt=outbox.Attempt(now, 5, 200, None, "ok")
    )


async def _lock_waiter(conn: Conn) -> int:
    """The backend waiting for a row lock in this database, once one is."""
    while True:
        found = await rows(
            conn,
            "SELECT pid FROM pg_stat_activity"
            " WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )
        if found:
            return int(found[0]["pid"])
        await asyncio.sleep(0.02)


_LOCK = "SELECT 1 FROM deliveries WHERE id = %(id)s FOR UPDATE"


async def test_completer__a_dropped_connection_is_retried(
    services: Services, conn: Conn, db_url: str
) -> None:
    [claim] = await _claimed(conn, 1)
    locker = await connect(db_url)
    try:
        # Hold the row so the outcome statement waits, then kill the backend running it.
        await locker.execute("BEGIN")
        await locker.execute(_LOCK, {"id": claim.id})
        write = asyncio.create_task(Completer(services.db).write(_sent(claim)))
        pid = await _lock_waiter(conn)
        await conn.execute("SELECT pg_terminate_backend(%(pid)s)", {"pid": pid})
        await locker.execute("ROLLBACK")
        assert await write is True
    finally:
        await locker.close()
    row = await delivery(conn, claim.id)
    assert (row["status"], row["attempts"], row["claim_token"]) == ("sent", 1, None)
    assert [a["outcome"] for a in await attempts(conn, claim.id)] == ["sent"]


async def test_completer__a_deadlock_victim_is_retried(
    services: Services, conn: Conn, db_url: str
) -> None:
    first, second = await _claimed(conn, 2)
    locker = await connect(db_url)
    try:
        # The test's session waits longest before checking for a deadlock: the outcome
        # statement is the victim.
        await locker.execute("SET deadlock_timeout = '20s'")
        await locker.execute("BEGIN")
        await locker.execute(_LOCK, {"id": second.id})
        completer = Completer(services.db)
        # One group: both outcomes are waiting before the writer starts.
        writes = asyncio.gather(completer.write(_sent(first)), completer.write(_sent(second)))
        await _lock_waiter(conn)
        # The group holds `first` and waits for `second`; taking `first` closes the cycle.
        await locker.execute(_LOCK, {"id": first.id})
        await locker.execute("COMMIT")
        assert await writes == [True, True]
    finally:
        await locker.close()
    for claim in (first, second):
        row = await delivery(conn, claim.id)
        assert (row["status"], row["attempts"]) == ("sent", 1)
        assert [a["outcome"] for a in await attempts(conn, claim.id)] == ["sent"]


@pytest.mark.slow
async def test_completer__two_workers_overlapping_groups_never_deadlock(
    conn: Conn, db_url: str
) -> None:
    """Two workers write outcomes for the same claims at once, in opposite orders (as a
    fenced late answer overlaps its successor's): each row is written by exactly one."""
    tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
    dst, rte = await make_route_to(conn, tenant, form, config={"url": URL})
    await make_deliveries(conn, tenant, form, dst, rte, count=2000, url=URL, due=utcnow())
    workers = [await connect(db_url) for _ in range(2)]
    rng = random.Random(14)
    try:
        for _ in range(5):
            claims = await outbox.claim_due(
                conn, now=utcnow(), limit=400, lease=timedelta(minutes=5), per_destination=400
            )
            assert len(claims) == 400
            group = [_sent(claim) for claim in claims]
            rng.shuffle(group)
            one, two = await asyncio.gather(
                outbox.finish(workers[0], group), outbox.finish(workers[1], group[::-1])
            )
            assert all(a != b for a, b in zip(one, two[::-1], strict=True))
    finally:
        for worker in workers:
            await worker.close()
    [counts] = await rows(
        conn,
        "SELECT count(*) FILTER (WHERE status = 'sent') AS sent,"
        " count(*) FILTER (WHERE attempts = 1 AND status = 'sent') AS once FROM deliveries",
    )
    assert counts == {"sent": 2000, "once": 2000}
