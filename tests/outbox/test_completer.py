"""Grouped outcome writes survive transient failures, cannot deadlock each other, and write
what a dead delivery leaves with its outcome."""

from __future__ import annotations

import asyncio
import json
import random
from datetime import timedelta

import pytest

from core.outbox import store as outbox
from core.outbox.completer import Completer
from core.outbox.worker import Deliverer
from core.platform.clock import utcnow
from core.platform.db import Conn, connect
from core.platform.services import Services
from tests.support.builders import (
    make_deliveries,
    make_delivery,
    make_hook,
    make_route_to,
    setup_form,
)
from tests.support.peers import receiver, status
from tests.support.records import attempts, dead_leaves, delivery, lock_waiter, rows

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
        pid = await lock_waiter(conn)
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
        await lock_waiter(conn)
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


# The first alert written fails as a lost server does (SQLSTATE 57P01); later ones succeed.
_FAIL_FIRST_ALERT = """
CREATE SEQUENCE alert_writes;
CREATE FUNCTION fail_first_alert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF nextval('alert_writes') = 1 THEN
        RAISE EXCEPTION 'injected' USING ERRCODE = '57P01';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER fail_first_alert BEFORE INSERT ON alerts
    FOR EACH ROW EXECUTE FUNCTION fail_first_alert();
"""


async def test_completer__a_dead_outcome_is_written_with_its_alert_and_hook_deliveries(
    services: Services, conn: Conn
) -> None:
    """The database fails between a dead outcome's statement and its alert: nothing of it
    stays, and the retry writes the outcome, the alert and the `delivery.dead` hook's
    delivery together, each once."""
    with receiver(status(400)) as broken, receiver() as watcher:
        tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
        dst, rte = await make_route_to(conn, tenant, form, config={"url": broken.url})
        _, dlv = await make_delivery(conn, tenant, form, dst, rte, target={"url": broken.url})
        await make_hook(conn, tenant, watcher.url, "delivery.dead")
        await conn.execute(_FAIL_FIRST_ALERT)
        # The pass that ends the delivery dead sends the hook's delivery too.
        stats = await Deliverer(services).run_pass(now=utcnow(), budget=30)
    assert (stats["dead"], stats["sent"], stats.get("errors", 0)) == (1, 1, 0)
    [request] = watcher.requests
    assert (json.loads(request.body)["delivery"], len(broken.requests)) == (dlv, 1)
    assert await dead_leaves(conn) == {"alerts": [(dst, 1, dlv)], "events": [dlv], "hooked": [dlv]}
    assert [a["outcome"] for a in await attempts(conn, dlv)] == ["dead"]


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
