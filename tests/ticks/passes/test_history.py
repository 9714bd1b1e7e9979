"""The history pass: events and delivery attempts in weekly partitions, made ahead and dropped
whole after the history period; rows no week holds deleted a batch per statement (handled
notices too: tests/ticks/passes/test_notices.py); through the retention function, spam
expires on every plan."""

from __future__ import annotations

import asyncio
import shutil
import time
from datetime import datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from core.destinations.registry import DESTINATION_TYPES
from core.platform.clock import utcnow
from core.platform.db import Conn, connect
from core.platform.migrate import MIGRATIONS_DIR, migrate
from core.platform.services import Services
from core.ticks.maintenance import RetentionOptions
from core.ticks.passes.history import HISTORY_DAYS, WEEKS_AHEAD, week_start
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


async def _partition_of(conn: Conn, table: str, row_id: int) -> str | None:
    found = await rows(
        conn, f"SELECT tableoid::regclass::text AS part FROM {table} WHERE id = %(id)s", id=row_id
    )
    return found[0]["part"] if found else None


async def _add_event(conn: Conn, org: str, at: datetime) -> int:
    [row] = await rows(
        conn,
        "INSERT INTO events (organization_id, type, created_at)"
        " VALUES (%(org)s, 'delivery.failed', %(at)s) RETURNING id",
        org=org,
        at=at,
    )
    return int(row["id"])


async def _add_attempt(conn: Conn, org: str, delivery: str, at: datetime) -> int:
    [row] = await rows(
        conn,
        "INSERT INTO delivery_attempts (organization_id, delivery_id, attempt, claim_token,"
        " started_at, duration_ms, outcome) VALUES (%(org)s, %(dlv)s, 1, gen_random_uuid(),"
        " %(at)s, 5, 'failed') RETURNING id",
        org=org,
        dlv=delivery,
        at=at,
    )
    return int(row["id"])


async def test_history__a_row_no_week_holds_yet_is_kept_then_moves_into_its_week(
    services: Services, conn: Conn
) -> None:
    tenant = await make_tenant(conn)
    later = utcnow() + timedelta(weeks=12)
    event = await _add_event(conn, tenant.org, later)
    assert await _partition_of(conn, "events", event) == "events_default"

    stats = await run_retention(services, now=later, budget=10)

    week = week_start(later).strftime("%Y%m%d")
    assert await _partition_of(conn, "events", event) == f"events_{week}"
    assert await rows(conn, "SELECT id FROM events_default") == []
    # That week and the next WEEKS_AHEAD, for both tables.
    assert stats["history_weeks_added"] == 2 * (WEEKS_AHEAD + 1)
    assert stats["submission_weeks_added"] == WEEKS_AHEAD + 1
    ahead = week_start(later) + timedelta(weeks=WEEKS_AHEAD)
    assert await rows(
        conn,
        "SELECT parent FROM history_partitions WHERE range_start = %(at)s ORDER BY parent",
        at=ahead,
    ) == [{"parent": "delivery_attempts"}, {"parent": "events"}, {"parent": "submissions"}]
    # A week's partition is scoped like its table.
    [scoped] = await rows(
        conn,
        "SELECT relrowsecurity FROM pg_class WHERE relname = %(name)s",
        name=f"events_{week}",
    )
    assert scoped == {"relrowsecurity": True}


async def test_history__a_week_past_the_period_is_dropped_whole_and_the_next_kept(
    services: Services, conn: Conn
) -> None:
    tenant = await make_tenant(conn)
    form = await make_form(conn, tenant)
    dst, rte = await make_route_to(conn, tenant, form)
    _, dlv = await make_delivery(conn, tenant, form, dst, rte, target={"url": "https://x.test"})
    [first] = await rows(
        conn,
        "SELECT min(range_start) AS range_start FROM history_partitions"
        " WHERE parent = 'events' AND range_start > '-infinity'",
    )
    week = first["range_start"]
    old = [await _add_event(conn, tenant.org, week + timedelta(hours=h)) for h in (1, 50, 160)]
    old_attempt = await _add_attempt(conn, tenant.org, dlv, week + timedelta(hours=2))
    kept = await _add_event(conn, tenant.org, week + timedelta(days=7, hours=1))
    kept_attempt = await _add_attempt(conn, tenant.org, dlv, week + timedelta(days=7, hours=2))

    # The day after the week's last moment turned HISTORY_DAYS old.
    now = week + timedelta(days=7 + HISTORY_DAYS, hours=1)
    stats = await run_retention(services, now=now, budget=10)

    assert stats["history_weeks_dropped"] >= 2
    name = week.strftime("%Y%m%d")
    gone = await rows(
        conn,
        "SELECT to_regclass(%(e)s) AS events, to_regclass(%(a)s) AS attempts",
        e=f"events_{name}",
        a=f"delivery_attempts_{name}",
    )
    assert gone == [{"events": None, "attempts": None}]
    assert [await _partition_of(conn, "events", i) for i in old] == [None, None, None]
    assert await _partition_of(conn, "delivery_attempts", old_attempt) is None
    assert await _partition_of(conn, "events", kept) is not None
    assert await _partition_of(conn, "delivery_attempts", kept_attempt) is not None
    # Erasing the delivery reaches its attempts in every week.
    await conn.execute("DELETE FROM deliveries WHERE id = %(d)s", {"d": dlv})
    assert await _partition_of(conn, "delivery_attempts", kept_attempt) is None


async def test_history__a_reader_holding_the_table_defers_the_drop_to_the_next_tick(
    services: Services, conn: Conn, db_url: str
) -> None:
    tenant = await make_tenant(conn)
    [first] = await rows(
        conn,
        "SELECT min(range_start) AS range_start FROM history_partitions"
        " WHERE parent = 'events' AND range_start > '-infinity'",
    )
    week = first["range_start"]
    event = await _add_event(conn, tenant.org, week + timedelta(hours=1))
    now = week + timedelta(days=7 + HISTORY_DAYS, hours=1)
    # Two days earlier the weeks around then are made, and this one is not past yet.
    await run_retention(services, now=now - timedelta(days=2), budget=10)
    assert await _partition_of(conn, "events", event) is not None
    reader = await psycopg.AsyncConnection.connect(db_url)
    try:
        await reader.execute("BEGIN")
        await reader.execute("SELECT count(*) FROM events")
        started = time.monotonic()
        stats = await run_retention(services, now=now, budget=10)
        waited = time.monotonic() - started
        assert stats["history_weeks_busy"] >= 1
        assert await _partition_of(conn, "events", event) is not None
        # Each busy week waited no longer than the lock timeout (1 s).
        assert waited < 1.5 * (stats["history_weeks_busy"] + 1)
    finally:
        await reader.execute("ROLLBACK")
        await reader.close()
    stats = await run_retention(services, now=now, budget=10)
    assert stats["history_weeks_busy"] == 0
    assert await _partition_of(conn, "events", event) is None


async def test_migration__existing_history_stays_in_the_legacy_partition_and_ids_go_on(
    empty_db_url: str, tmp_path: Path
) -> None:
    earlier = tmp_path / "migrations"
    earlier.mkdir()
    for path in sorted(MIGRATIONS_DIR.glob("*.sql")):
        if path.name < "0061":
            shutil.copy(path, earlier / path.name)
    async with await connect(empty_db_url) as conn:
        await migrate(conn, earlier, destination_types=DESTINATION_TYPES)
        tenant = await make_tenant(conn)
        before = [await _add_event(conn, tenant.org, utcnow() - timedelta(days=d)) for d in (1, 2)]
        assert "0061_weekly_history.sql" in await migrate(conn, destination_types=DESTINATION_TYPES)
        assert [await _partition_of(conn, "events", i) for i in before] == ["events_legacy"] * 2
        after = await _add_event(conn, tenant.org, utcnow())
        assert after > max(before)
        assert len(await rows(conn, "SELECT id FROM events")) == 3
