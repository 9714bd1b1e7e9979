from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import httpx

from core.http.api_app import create_api_app
from core.http.submit_app import create_submit_app
from core.platform.db import Conn
from core.platform.health import LIVE_HEARTBEAT_SECONDS
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


async def test_health__installation_503_when_a_due_delivery_waits_too_long(
    services: Services, conn: Conn
) -> None:
    ids = await seed_organization(conn)
    await record_heartbeat(
        services, TICKS["deliver"], now=datetime.now(UTC), result={}, worker_id="worker@a:1"
    )
    await conn.execute(
        "UPDATE deliveries SET next_attempt_at = %(at)s WHERE id = %(id)s",
        {"at": datetime.now(UTC) - timedelta(minutes=20), "id": ids["dlv"]},
    )
    async with _client(services) as client:
        installation = await client.get("/health?scope=installation")
        replica = await client.get("/health")
    assert installation.status_code == 503
    body = installation.json()
    assert (body["status"], body["live_workers"]) == ("unhealthy", 1)
    assert body["oldest_due_delivery_age_seconds"] > 1000
    # The replica itself serves: a load balancer keeps it, whatever the outbox's state.
    assert (replica.status_code, replica.json()["status"]) == (200, "ok")


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
        draining = await client.get("/health?scope=installation")
    assert (draining.status_code, draining.json()["oldest_due_delivery_age_seconds"]) == (
        200,
        None,
    )
    await conn.execute(lease, {"id": in_flight, "until": datetime.now(UTC) - timedelta(minutes=1)})
    async with _client(services) as client:
        stuck = await client.get("/health?scope=installation")
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
    # One gone for three minutes no longer counts.
    gone = now - timedelta(minutes=3)
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


async def _move_beats_back(conn: Conn, seconds: float) -> None:
    """Every heartbeat, `seconds` older: the database's clock moved, not the test's."""
    await conn.execute(
        "UPDATE worker_heartbeats SET last_beat_at = last_beat_at - make_interval(secs => %(s)s)",
        {"s": seconds},
    )


async def test_health__stale_heartbeats_count_no_live_worker(
    services: Services, conn: Conn
) -> None:
    now = datetime.now(UTC)
    for name in ("worker@a:1", "worker@b:2", "worker@c:3"):
        await record_heartbeat(services, TICKS["deliver"], now=now, result={}, worker_id=name)
    await _move_beats_back(conn, LIVE_HEARTBEAT_SECONDS - 10)
    async with _client(services) as client:
        late = (await client.get("/health")).json()
        await _move_beats_back(conn, 20)  # now each is 10 s past the interval
        stale = (await client.get("/health")).json()
    assert late["live_workers"] == 3
    assert (stale["status"], stale["live_workers"]) == ("ok", 0)
    assert stale["worker_heartbeat_age_seconds"] > LIVE_HEARTBEAT_SECONDS


async def test_health__a_serve_only_replica_is_healthy_without_a_worker_while_deliveries_wait(
    services: Services, conn: Conn
) -> None:
    await seed_organization(conn)  # one delivery due now
    await record_heartbeat(
        services, TICKS["deliver"], now=datetime.now(UTC), result={}, worker_id="worker@a:1"
    )
    await _move_beats_back(conn, 600)  # the only worker stopped ten minutes ago
    async with _client(services) as client:
        replica = await client.get("/health")
        installation = await client.get("/health?scope=installation")
    assert (replica.status_code, replica.json()["live_workers"]) == (200, 0)
    assert replica.json()["oldest_due_delivery_age_seconds"] is not None
    # Due deliveries and no live worker: the installation does not deliver.
    assert (installation.status_code, installation.json()["status"]) == (503, "unhealthy")


async def test_health__a_replica_whose_own_worker_stopped_beating_is_unhealthy(
    services: Services, conn: Conn
) -> None:
    mine = replace(services, worker="dev@here:1")
    await record_heartbeat(
        services, TICKS["deliver"], now=datetime.now(UTC), result={}, worker_id="dev@here:1"
    )
    async with _client(mine) as client:
        beating = await client.get("/health")
        await _move_beats_back(conn, LIVE_HEARTBEAT_SECONDS + 10)
        stopped = await client.get("/health")
    assert beating.status_code == 200
    assert beating.json()["replica_worker_heartbeat_age_seconds"] < 60
    assert stopped.status_code == 503
    body = stopped.json()
    assert (body["status"], body["replica_worker"]) == ("unhealthy", "dev@here:1")
    assert body["replica_worker_heartbeat_age_seconds"] > LIVE_HEARTBEAT_SECONDS
