"""The worker through PgBouncer in transaction mode: without a direct URL it polls and
delivers everything exactly once; with one it LISTENs there."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from pathlib import Path

import httpx

from core.http.server import combined_app
from core.platform.db import Conn
from core.platform.services import Services
from core.ticks.worker import POLL_SECONDS, Worker
from tests.support.builders import make_delivery, make_route_to, setup_form
from tests.support.peers import receiver
from tests.support.records import rows
from tests.support.settings import built_services

POSTS = 60


async def _until(predicate: object, seconds: float) -> None:
    assert callable(predicate)
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def test_worker__through_the_pooler_delivers_every_submit_exactly_once(
    pooled: Services, conn: Conn
) -> None:
    tenant, form = await setup_form(conn, plan="self_hosted", routes=0, rate_limit_max=POSTS)
    # Two workers on the pooler, racing for the same claims.
    workers = [Worker(pooled, name=f"worker@pooler{n}", ticks=["deliver"]) for n in (1, 2)]
    assert all(worker.listen_url is None for worker in workers)  # nothing can LISTEN
    with receiver() as peer:
        await make_route_to(conn, tenant, form, config={"url": peer.url})
        tasks = [asyncio.create_task(worker.run()) for worker in workers]
        try:
            app = combined_app(pooled, local=False)
            async with httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8080"
            ) as client:
                answers = await asyncio.gather(
                    *(
                        client.post(
                            f"/s/{form}",
                            data={"n": str(n)},
                            headers={"Accept": "application/json"},
                        )
                        for n in range(POSTS)
                    )
                )
            assert Counter(answer.status_code for answer in answers) == {201: POSTS}
            await _until(lambda: len(peer.requests) >= POSTS, 60)
            await asyncio.sleep(2 * POLL_SECONDS)  # time for a duplicate to show up
        finally:
            for worker in workers:
                worker.stop.set()
            await asyncio.wait_for(asyncio.gather(*tasks), 30)
    received = Counter(request.headers["webhook-id"] for request in peer.requests)
    assert len(received) == POSTS and set(received.values()) == {1}
    sent = await rows(
        conn, "SELECT status, attempts, count(*) AS n FROM deliveries GROUP BY status, attempts"
    )
    assert sent == [{"status": "sent", "attempts": 1, "n": POSTS}]


async def test_worker__without_a_direct_url_polls_a_delivery_made_while_idle(
    pooled: Services, conn: Conn
) -> None:
    worker = Worker(pooled, name="worker@pooler", ticks=["deliver"])
    task = asyncio.create_task(worker.run())
    try:
        with receiver() as peer:
            await asyncio.sleep(0.5)  # the first (empty) pass has run
            tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
            dst, rte = await make_route_to(conn, tenant, form, config={"url": peer.url})
            await make_delivery(conn, tenant, form, dst, rte, target={"url": peer.url})
            started = time.monotonic()
            await _until(lambda: peer.requests, 15)
            waited = time.monotonic() - started
    finally:
        worker.stop.set()
        await asyncio.wait_for(task, 30)
    assert waited < POLL_SECONDS + 3  # the poll, not the 15 s tick


async def test_worker__with_a_direct_url_listens_there(
    pooled_url: str, db_url: str, tmp_path: Path, conn: Conn
) -> None:
    async with built_services(
        pooled_url, tmp_path, db_pooler="transaction", direct_database_url=db_url
    ) as services:
        worker = Worker(services, name="worker@pooler", ticks=["deliver"])
        assert worker.listen_url == db_url
        task = asyncio.create_task(worker.run())
        try:
            with receiver() as peer:
                await asyncio.sleep(0.5)
                listening = await rows(
                    conn,
                    "SELECT count(*) AS n FROM pg_stat_activity"
                    " WHERE datname = current_database() AND query LIKE 'LISTEN%%'",
                )
                tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
                dst, rte = await make_route_to(conn, tenant, form, config={"url": peer.url})
                _, dlv = await make_delivery(conn, tenant, form, dst, rte, target={"url": peer.url})
                await conn.execute("SELECT pg_notify('postbag_deliveries', %(id)s)", {"id": dlv})
                await _until(lambda: peer.requests, 10)  # woken: the tick is 15 s
        finally:
            worker.stop.set()
            await asyncio.wait_for(task, 30)
    assert listening == [{"n": 1}]  # one LISTEN, on the direct connection
