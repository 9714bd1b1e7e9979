"""The history pass deletes events and delivery attempts after the history period, a batch
per statement (handled notices too: tests/ticks/passes/test_notices.py); through the
retention function, spam expires on every plan."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

import pytest

from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from core.ticks.maintenance import RetentionOptions
from core.ticks.passes.history import HISTORY_DAYS
from core.ticks.retention import run_retention
from tests.support.builders import (
    make_delivery,
    make_form,
    make_route_to,
    make_tenant,
    setup_form,
)
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
