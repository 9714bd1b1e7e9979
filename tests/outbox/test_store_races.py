"""Several workers, expired leases and crashes: every delivery arrives, none twice by design."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections import Counter
from datetime import timedelta

import pytest

from core.outbox.worker import Deliverer, WorkerOptions
from core.platform.clock import utcnow
from core.platform.db import Conn, connect
from core.platform.ids import new_id
from core.platform.services import Services
from tests.outbox.processes import wait_exit, worker
from tests.support.builders import (
    make_deliveries,
    make_delivery,
    make_hook,
    make_route_to,
    setup_form,
)
from tests.support.peers import Answer, Request, receiver, status
from tests.support.records import attempts, dead_leaves, delivery, lock_waiter

pytestmark = pytest.mark.slow


async def test_races__four_workers_deliver_each_exactly_once(db_url: str, conn: Conn) -> None:
    with receiver() as peer:
        tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
        dst, rte = await make_route_to(conn, tenant, form, config={"url": peer.url})
        await make_deliveries(conn, tenant, form, dst, rte, count=5000, url=peer.url, due=utcnow())
        workers = [worker(db_url) for _ in range(4)]
        await wait_exit(workers, timeout=150)
    seen = Counter(request.headers["webhook-id"] for request in peer.requests)
    assert len(seen) == 5000
    assert max(seen.values()) == 1
    cur = await conn.execute("SELECT status, count(*) AS n FROM deliveries GROUP BY status")
    assert await cur.fetchall() == [{"status": "sent", "n": 5000}]
    cur = await conn.execute("SELECT count(*) AS n FROM delivery_attempts WHERE outcome = 'sent'")
    assert await cur.fetchone() == {"n": 5000}


async def test_races__a_late_answer_of_an_expired_claim_is_fenced(
    services: Services, conn: Conn
) -> None:
    calls: list[float] = []

    def respond(_r: Request) -> Answer:
        calls.append(time.monotonic())
        if len(calls) == 1:
            time.sleep(3.0)  # past the first claim's 2-second lease
            return 500, {}, b"late"
        return 200, {}, b"ok"

    with receiver(respond) as peer:
        tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
        dst, rte = await make_route_to(conn, tenant, form, config={"url": peer.url})
        _, dlv = await make_delivery(conn, tenant, form, dst, rte, target={"url": peer.url})
        slow = Deliverer(services, options=WorkerOptions(lease=timedelta(seconds=2), timeout=5))
        first = asyncio.create_task(slow.run_pass(now=utcnow(), budget=1))
        while not calls:
            await asyncio.sleep(0.05)
        await asyncio.sleep(2.2)
        second = await Deliverer(services, options=WorkerOptions(timeout=5)).run_pass(
            now=utcnow(), budget=1
        )
        assert second["sent"] == 1
        assert (await delivery(conn, dlv))["status"] == "sent"
        late = await first
    assert late["fenced"] == 1
    assert len(peer.requests) == 2
    row = await delivery(conn, dlv)
    # The expired claim's attempt counts: recorded `interrupted`, then its late answer fenced.
    assert (row["status"], row["attempts"], row["claim_token"]) == ("sent", 2, None)
    history = [(a["attempt"], a["outcome"], a["error_class"]) for a in await attempts(conn, dlv)]
    assert history == [(1, "failed", "interrupted"), (2, "sent", None), (1, "fenced", None)]
    cur = await conn.execute("SELECT count(*) AS n FROM alerts")
    assert await cur.fetchone() == {"n": 0}
    cur = await conn.execute("SELECT health, consecutive_failures FROM destinations")
    assert await cur.fetchone() == {"health": "healthy", "consecutive_failures": 0}


async def _only_connection(conn: Conn) -> None:
    """Wait until `conn` is the only connection to its database.

    A process killed by SIGKILL leaves its backends running what they had started: a COMMIT
    sent just before the kill still commits. Counted before they exit, the rows they write
    are counted on the wrong side (a busy machine made it happen).
    """
    deadline = time.monotonic() + 30
    while True:
        cur = await conn.execute(
            "SELECT count(*) AS n FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        if await cur.fetchone() == {"n": 0}:
            return
        assert time.monotonic() < deadline, "the killed worker's backends are still running"
        await asyncio.sleep(0.02)


async def test_races__kill_9_mid_pass_loses_nothing(
    services: Services, conn: Conn, db_url: str
) -> None:
    def respond(_r: Request) -> Answer:
        time.sleep(0.02)
        return 200, {}, b"ok"

    with receiver(respond) as peer:
        tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
        dst, rte = await make_route_to(conn, tenant, form, config={"url": peer.url})
        await make_deliveries(conn, tenant, form, dst, rte, count=1000, url=peer.url, due=utcnow())
        process = worker(db_url)
        deadline = time.monotonic() + 60
        while len(peer.requests) < 100 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        await _only_connection(conn)
        cur = await conn.execute(
            "SELECT count(*) FILTER (WHERE status = 'sending') AS sending,"
            " count(*) FILTER (WHERE status = 'sent') AS sent FROM deliveries"
        )
        mid = await cur.fetchone()
        assert mid is not None and mid["sending"] > 0 and mid["sent"] < 1000
        # After the lease (5 minutes, passed in as time) another pass sends the rest.
        stats = await Deliverer(services).run_pass(now=utcnow() + timedelta(minutes=6), budget=120)
    assert stats["sent"] == 1000 - mid["sent"]
    cur = await conn.execute("SELECT status, count(*) AS n FROM deliveries GROUP BY status")
    assert await cur.fetchall() == [{"status": "sent", "n": 1000}]
    seen = Counter(request.headers["webhook-id"] for request in peer.requests)
    assert len(seen) == 1000  # every delivery arrived; repeats only for lost answers


async def test_races__a_worker_killed_at_a_dead_outcome_leaves_it_whole_to_the_next(
    services: Services, conn: Conn, db_url: str
) -> None:
    """The worker dies, with its database session, after a delivery's `dead` outcome was
    written and before its alert and its `delivery.dead` hook delivery were: none of them
    stays, the delivery is still `sending`, and the next worker, once its lease is over,
    ends it dead with its alert and its hook delivery, each once."""
    with receiver(status(400)) as broken, receiver() as watcher:
        tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
        dst, rte = await make_route_to(conn, tenant, form, config={"url": broken.url})
        _, dlv = await make_delivery(conn, tenant, form, dst, rte, target={"url": broken.url})
        await make_hook(conn, tenant, watcher.url, "delivery.dead")
        # An open alert of the same subject, uncommitted: the worker's alert waits on it,
        # its outcome already written (the gap).
        blocker = await connect(db_url)
        try:
            await blocker.execute("BEGIN")
            await blocker.execute(
                "INSERT INTO alerts (id, organization_id, kind, subject_id)"
                " VALUES (%(id)s, %(org)s, 'delivery.dead', %(dst)s)",
                {"id": new_id("alr"), "org": tenant.org, "dst": dst},
            )
            process = worker(db_url)
            pid = await lock_waiter(conn)
            os.kill(process.pid, signal.SIGKILL)
            process.wait()
            await conn.execute("SELECT pg_terminate_backend(%(pid)s)", {"pid": pid})
            await blocker.execute("ROLLBACK")
        finally:
            await blocker.close()
        await _only_connection(conn)
        row = await delivery(conn, dlv)
        assert (row["status"], row["attempts"]) == ("sending", 1)
        assert await dead_leaves(conn) == {"alerts": [], "events": [], "hooked": []}
        # After the lease (5 minutes, passed in as time) the next pass sends it again.
        stats = await Deliverer(services).run_pass(now=utcnow() + timedelta(minutes=6), budget=30)
    assert (stats["dead"], stats["sent"], len(broken.requests)) == (1, 1, 2)
    [request] = watcher.requests
    assert json.loads(request.body)["delivery"] == dlv
    assert await dead_leaves(conn) == {"alerts": [(dst, 1, dlv)], "events": [dlv], "hooked": [dlv]}
    history = [(a["attempt"], a["outcome"], a["error_class"]) for a in await attempts(conn, dlv)]
    assert history == [(1, "failed", "interrupted"), (2, "dead", None)]
