"""The retention tick bounds storage: spam expires on every plan, events and delivery
attempts are pruned after the history period, acknowledgement counts after their day,
heartbeats of workers long gone, inferred schema versions stop at the plan's."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

import pytest

from core.owner.members import RESET_WINDOW
from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from core.ticks.retention import HEARTBEAT_DAYS, HISTORY_DAYS, RetentionOptions, run_retention
from tests.support.builders import (
    add_schema,
    make_delivery,
    make_form,
    make_route_to,
    make_submission,
    make_tenant,
    setup_form,
)
from tests.support.dashboard import csrf_of, dashboard_client
from tests.support.lambdas import FakeContext, invoke, load_event
from tests.support.records import rows
from tests.support.settings import TEST_SECRET_KEY
from tests.support.submit import submit_client

JSON_ACCEPT = {"Accept": "application/json"}


async def test_retention_tick__expires_old_spam_on_self_hosted_and_prunes_old_history(
    db_url: str,
    conn: Conn,
    services: Services,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
    async with submit_client(services) as client:
        for data in ({"n": "ham"}, {"n": "spam", "_gotcha": "x"}):
            response = await client.post(f"/s/{form}", data=data, headers=JSON_ACCEPT)
            assert response.status_code == 201
    # A month and a day later (as if they had arrived then).
    await conn.execute(
        "UPDATE submissions SET received_at = received_at - interval '31 days',"
        " erase_at = erase_at - interval '31 days'"
    )
    other = await make_form(conn, tenant, name="Other")
    dst, rte = await make_route_to(conn, tenant, other)
    _, dlv = await make_delivery(conn, tenant, other, dst, rte, target={"url": "https://x.test"})
    now = utcnow()
    for days in (HISTORY_DAYS + 1, HISTORY_DAYS - 1):
        at = now - timedelta(days=days)
        await conn.execute(
            "INSERT INTO delivery_attempts (organization_id, delivery_id, attempt, claim_token,"
            " started_at, duration_ms, outcome) VALUES (%(org)s, %(dlv)s, 1,"
            " gen_random_uuid(), %(at)s, 5, 'failed')",
            {"org": tenant.org, "dlv": dlv, "at": at},
        )
        await conn.execute(
            "INSERT INTO events (organization_id, type, subject_id, created_at)"
            " VALUES (%(org)s, 'delivery.failed', %(dlv)s, %(at)s)",
            {"org": tenant.org, "dlv": dlv, "at": at},
        )
    event = load_event("eventbridge_scheduled.json")
    [stats] = await asyncio.to_thread(
        invoke,
        "retention_tick",
        [event],
        FakeContext(remaining_ms=20_000),
        monkeypatch,
        POSTBAG_DATABASE_URL=db_url,
        POSTBAG_SECRET_KEY=TEST_SECRET_KEY,
        POSTBAG_STORAGE_URL=f"file://{tmp_path / 'files'}",
    )
    assert (stats["expired"], stats["events_pruned"], stats["attempts_pruned"]) == (1, 1, 1)
    left = await rows(
        conn,
        'SELECT status, "values", erase_reason FROM submissions WHERE form_id = %(f)s'
        " ORDER BY status",
        f=form,
    )
    assert left == [
        {"status": "accepted", "values": {"n": "ham"}, "erase_reason": None},
        {"status": "spam", "values": None, "erase_reason": "expired"},
    ]
    cutoff = now - timedelta(days=HISTORY_DAYS)
    old_events = await rows(conn, "SELECT id FROM events WHERE created_at < %(c)s", c=cutoff)
    assert old_events == []
    assert len(await rows(conn, "SELECT id FROM events WHERE created_at >= %(c)s", c=cutoff)) > 0
    attempts = await rows(conn, "SELECT started_at FROM delivery_attempts")
    assert [a["started_at"] > cutoff for a in attempts] == [True]


async def test_retention__prunes_in_batches(services: Services, conn: Conn) -> None:
    tenant = await make_tenant(conn)
    old = utcnow() - timedelta(days=HISTORY_DAYS + 1)
    await conn.execute(
        "INSERT INTO events (organization_id, type, created_at)"
        " SELECT %(org)s, 'submission.received', %(at)s FROM generate_series(1, 12)",
        {"org": tenant.org, "at": old},
    )
    stats = await run_retention(
        services, now=utcnow(), budget=10, options=RetentionOptions(prune_batch=5)
    )
    assert stats["events_pruned"] == 12
    assert await rows(conn, "SELECT id FROM events WHERE created_at = %(at)s", at=old) == []


async def test_retention__forgets_acknowledgement_counts_of_past_days(
    services: Services, conn: Conn
) -> None:
    """Only today's count caps acknowledgements: an address that never comes back leaves no
    row behind once its day is over."""
    now = utcnow()
    for recipient, day in ((b"past", now - timedelta(days=1)), (b"today", now)):
        await conn.execute(
            "INSERT INTO acknowledgement_counts (recipient_hash, day, sent)"
            " VALUES (%(r)s, (%(at)s AT TIME ZONE 'UTC')::date, 5)",
            {"r": recipient, "at": day},
        )
    stats = await run_retention(services, now=now, budget=10)
    assert stats["acknowledgement_counts_pruned"] == 1
    kept = await rows(conn, "SELECT recipient_hash FROM acknowledgement_counts")
    assert [bytes(row["recipient_hash"]) for row in kept] == [b"today"]


async def test_retention__forgets_reset_counts_whose_window_ended(
    services: Services, conn: Conn
) -> None:
    """A reset asked for any address counts (a stranger's too): the row goes once its
    window is over, the next request would start a new one."""
    async with dashboard_client(services) as client:
        page = await client.get("/app/forgot")
        await client.post("/app/forgot", data={"csrf": csrf_of(page.text), "email": "x@a.test"})
    later = utcnow() + RESET_WINDOW
    await conn.execute(
        "INSERT INTO reset_counts (recipient_hash, window_start, sent) VALUES ('\\x01', %(at)s, 1)",
        {"at": later},
    )
    stats = await run_retention(services, now=later + timedelta(seconds=1), budget=10)
    assert stats["reset_counts_pruned"] == 1
    kept = await rows(conn, "SELECT recipient_hash FROM reset_counts")
    assert [bytes(row["recipient_hash"]) for row in kept] == [b"\x01"]


async def test_retention__forgets_heartbeats_of_workers_long_gone(
    services: Services, conn: Conn
) -> None:
    now = utcnow()
    for worker, days in (("worker@gone:1", HEARTBEAT_DAYS + 1), ("worker@here:2", 0)):
        await conn.execute(
            "INSERT INTO worker_heartbeats (worker_id, tick, last_beat_at)"
            " VALUES (%(w)s, 'deliver', %(at)s)",
            {"w": worker, "at": now - timedelta(days=days)},
        )
    stats = await run_retention(services, now=now, budget=10)
    assert stats["heartbeats_pruned"] == 1
    kept = await rows(
        conn, "SELECT worker_id FROM worker_heartbeats WHERE worker_id LIKE 'worker@%%'"
    )
    assert kept == [{"worker_id": "worker@here:2"}]


async def test_inference__stops_at_the_plans_schema_versions(
    services: Services, conn: Conn
) -> None:
    tenant = await make_tenant(conn, plan="free")
    form = await make_form(conn, tenant, schema_mode="observe")
    for _ in range(20):
        await add_schema(conn, tenant, form, {"type": "object"})
    later = utcnow() + timedelta(minutes=1)
    await make_submission(conn, tenant, form, {"email": "a@example.com"}, received_at=later)
    stats = await run_retention(services, now=later, budget=10)
    assert stats["schemas_inferred"] == 0
    [latest] = await rows(conn, "SELECT max(version) AS v FROM form_schemas")
    assert latest["v"] == 20
