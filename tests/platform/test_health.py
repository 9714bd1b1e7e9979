from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import httpx

from core.http.api_app import create_api_app
from core.http.submit_app import create_submit_app
from core.platform.db import Conn
from core.platform.services import Services
from core.platform.settings import load_settings
from core.ticks.registry import TICKS, record_heartbeat
from tests.support.builders import make_delivery, make_route_to, setup_form
from tests.support.seed import seed_organization


def _client(services: Services, *, api: bool = False) -> httpx.AsyncClient:
    app = create_api_app(services) if api else create_submit_app(services)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test")


async def test_health__ok_on_an_idle_database(services: Services) -> None:
    for api in (False, True):
        async with _client(services, api=api) as client:
            response = await client.get("/health")
        assert response.status_code == 200
        assert response.json()["status"] == "ok"


async def test_health__503_when_a_due_delivery_waits_too_long(
    services: Services, conn: Conn
) -> None:
    ids = await seed_organization(conn)
    await conn.execute(
        "UPDATE deliveries SET next_attempt_at = %(at)s WHERE id = %(id)s",
        {"at": datetime.now(UTC) - timedelta(minutes=20), "id": ids["dlv"]},
    )
    async with _client(services) as client:
        response = await client.get("/health")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unhealthy"
    assert body["oldest_due_delivery_age_seconds"] > 1000


async def test_health__a_slow_destination_draining_its_backlog_is_not_a_stuck_outbox(
    services: Services, conn: Conn
) -> None:
    """A destination with a send under a live lease is draining: its old backlog keeps
    /health at 200. Once that lease has run out, the same backlog is a 503."""
    tenant, form = await setup_form(conn, routes=0)
    dst, rte = await make_route_to(conn, tenant, form, config={"url": "https://example.com/h"})
    long_ago = datetime.now(UTC) - timedelta(minutes=20)
    await make_delivery(
        conn,
        tenant,
        form,
        dst,
        rte,
        target={"url": "https://example.com/h"},
        next_attempt_at=long_ago,
    )
    _, in_flight = await make_delivery(
        conn, tenant, form, dst, rte, target={"url": "https://example.com/h"}
    )
    lease = (
        "UPDATE deliveries SET status = 'sending', claim_token = gen_random_uuid(),"
        " claimed_until = %(until)s WHERE id = %(id)s"
    )
    await conn.execute(lease, {"id": in_flight, "until": datetime.now(UTC) + timedelta(minutes=1)})
    async with _client(services) as client:
        draining = await client.get("/health")
    assert (draining.status_code, draining.json()["oldest_due_delivery_age_seconds"]) == (
        200,
        None,
    )
    await conn.execute(lease, {"id": in_flight, "until": datetime.now(UTC) - timedelta(minutes=1)})
    async with _client(services) as client:
        stuck = await client.get("/health")
    assert stuck.status_code == 503
    assert stuck.json()["oldest_due_delivery_age_seconds"] > 1000


async def test_health__503_when_the_database_is_unreachable() -> None:
    settings = load_settings(
        database_url="postgresql://postgres@127.0.0.1:1/postgres", db_connect_timeout=1
    )
    services = Services.from_settings(settings)
    try:
        async with _client(services) as client:
            response = await client.get("/health")
    finally:
        await services.db.close()
    assert response.status_code == 503
    assert response.json()["database"] is False


async def test_health__counts_live_delivery_workers_each_by_its_name(services: Services) -> None:
    now = datetime.now(UTC)
    deliver, digest = TICKS["deliver"], TICKS["digest"]
    # A worker running several ticks keeps its deliver beat after a digest pass.
    await record_heartbeat(services, deliver, now=now, result={}, worker_id="worker@a:1")
    await record_heartbeat(services, digest, now=now, result={}, worker_id="worker@a:1")
    await record_heartbeat(services, deliver, now=now, result={}, worker_id="worker@b:2")
    # One gone for ten minutes no longer counts.
    gone = now - timedelta(minutes=10)
    await record_heartbeat(services, deliver, now=gone, result={}, worker_id="worker@c:3")
    async with _client(services) as client:
        body = (await client.get("/health")).json()
    assert (body["status"], body["live_workers"], body["replica_worker"]) == ("ok", 2, None)
    assert body["worker_heartbeat_age_seconds"] < 60


async def test_health__a_pass_ending_after_a_later_one_moves_no_beat_back(
    services: Services, conn: Conn
) -> None:
    # A worker's deliver passes overlap: one that started ten minutes ago ends after the
    # one that started now, and the worker still counts as live.
    now = datetime.now(UTC)
    deliver = TICKS["deliver"]
    await record_heartbeat(services, deliver, now=now, result={"sent": 1}, worker_id="w@a:1")
    await record_heartbeat(
        services, deliver, now=now - timedelta(minutes=10), result={"sent": 2}, worker_id="w@a:1"
    )
    async with _client(services) as client:
        body = (await client.get("/health")).json()
    assert (body["status"], body["live_workers"]) == ("ok", 1)
    assert body["worker_heartbeat_age_seconds"] < 60
    cur = await conn.execute("SELECT last_pass FROM worker_heartbeats")
    assert await cur.fetchall() == [{"last_pass": {"sent": 1}}]


async def test_health__names_the_worker_this_replica_runs(services: Services) -> None:
    async with _client(replace(services, worker="dev@here:1"), api=True) as client:
        body = (await client.get("/health")).json()
    assert (body["status"], body["replica_worker"], body["live_workers"]) == (
        "ok",
        "dev@here:1",
        0,
    )
