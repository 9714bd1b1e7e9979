"""A stream's settings kept from an earlier ingest (core/streams/ingest.py): the next ingest
skips reading them, and any change to what ingest reads, made by another process, takes
effect on the very next event; a revoked key fails at once."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.ids import new_id
from core.platform.services import Services
from tests.streams.test_ingest import ingest_headers, new_stream
from tests.support.api import api_client, assert_problem
from tests.support.builders import Tenant, make_destination, make_tenant
from tests.support.records import rows


async def _unrevised(conn: Conn, sql: str, *params: str) -> None:
    """Run `sql` on streams with the trigger that moves the revision switched off."""
    await conn.execute("ALTER TABLE streams DISABLE TRIGGER streams_revised")
    try:
        await conn.execute(sql, params)
    finally:
        await conn.execute("ALTER TABLE streams ENABLE TRIGGER streams_revised")


async def _retention_days(conn: Conn, event: str) -> int:
    [row] = await rows(
        conn,
        "SELECT extract(day FROM erase_at - received_at)::int AS days FROM stream_events "
        "WHERE id = %(id)s",
        id=event,
    )
    return int(row["days"])


async def test_kept_stream__the_next_ingest_uses_it_without_reading_the_stream(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn, plan="pro")
    async with api_client(services) as client:
        stream = await new_stream(client, acme, retention_days=30)
        path = f"/v1/streams/{stream['id']}/events"
        key = ingest_headers(stream)

        async def post(n: int) -> str:
            answer = await client.post(
                path, json={"id": f"e-{n}", "type": "t", "data": {}}, headers=key
            )
            assert answer.status_code == 202, answer.text
            return str(answer.json()["event"])

        first = await post(1)
        # A change the revision does not see: only an ingest that read the stream would.
        update = "UPDATE streams SET retention_days = 7 WHERE id = %s"
        await _unrevised(conn, update, stream["id"])
        second = await post(2)
        # Any change through the normal path moves the revision: the next ingest reads it.
        await conn.execute(update, (stream["id"],))
        third = await post(3)
    assert [await _retention_days(conn, e) for e in (first, second, third)] == [30, 30, 7]


Change = Callable[[Conn, Tenant, dict[str, Any]], Awaitable[None]]


async def _close(conn: Conn, tenant: Tenant, stream: dict[str, Any]) -> None:
    await conn.execute("UPDATE streams SET accepting = false WHERE id = %s", (stream["id"],))


async def _delete(conn: Conn, tenant: Tenant, stream: dict[str, Any]) -> None:
    await conn.execute("UPDATE streams SET deleted_at = now() WHERE id = %s", (stream["id"],))


async def _revoke_key(conn: Conn, tenant: Tenant, stream: dict[str, Any]) -> None:
    await conn.execute(
        "UPDATE stream_keys SET revoked_at = now() WHERE id = %s", (stream["ingest_key"]["id"],)
    )


async def _enforce_schema(conn: Conn, tenant: Tenant, stream: dict[str, Any]) -> None:
    await conn.execute(
        "INSERT INTO stream_schemas (organization_id, stream_id, version, schema) "
        "VALUES (%s, %s, 1, %s)",
        (tenant.org, stream["id"], json.dumps({"type": "object", "required": ["email"]})),
    )
    await conn.execute("UPDATE streams SET schema_mode = 'enforce' WHERE id = %s", (stream["id"],))


async def _add_route(conn: Conn, tenant: Tenant, stream: dict[str, Any]) -> None:
    destination = await make_destination(conn, tenant)
    await conn.execute(
        "INSERT INTO stream_routes (id, organization_id, stream_id, destination_id) "
        "VALUES (%s, %s, %s, %s)",
        (new_id("srt"), tenant.org, stream["id"], destination),
    )


async def _downgrade_plan_over_its_quota(
    conn: Conn, tenant: Tenant, stream: dict[str, Any]
) -> None:
    await conn.execute(
        # Shard 15 may hold the event posted before (each post counts in a shard at random).
        "INSERT INTO usage_counters (organization_id, month, shard, events) "
        "VALUES (%s, %s, 15, 1000) ON CONFLICT (organization_id, month, shard)"
        " DO UPDATE SET events = usage_counters.events + 1000",
        (tenant.org, utcnow().date().replace(day=1)),
    )
    await conn.execute("UPDATE organizations SET plan = 'free' WHERE id = %s", (tenant.org,))


CHANGES: list[tuple[Change, str]] = [
    (_close, "403 stream_closed"),
    (_delete, "401 unauthenticated"),
    (_revoke_key, "401 unauthenticated"),
    (_enforce_schema, "quarantined schema_violation"),
    (_add_route, "1 delivery"),
    (_downgrade_plan_over_its_quota, "402 plan_limit"),
]


@pytest.mark.parametrize(("change", "expected"), CHANGES, ids=[c.__name__ for c, _ in CHANGES])
async def test_kept_stream__a_change_by_another_process_takes_effect_on_the_next_event(
    services: Services, conn: Conn, change: Change, expected: str
) -> None:
    acme = await make_tenant(conn, plan="pro")
    async with api_client(services) as client:
        stream = await new_stream(client, acme)
        path = f"/v1/streams/{stream['id']}/events"
        key = ingest_headers(stream)
        before = await client.post(path, json={"id": "1", "type": "t", "data": {}}, headers=key)
        assert before.json()["status"] == "accepted"
        await change(conn, acme, stream)
        after = await client.post(path, json={"id": "2", "type": "t", "data": {}}, headers=key)
    if expected[0].isdigit() and expected[1].isdigit():
        status, code = expected.split()
        assert_problem(after, int(status), code)
        assert len(await rows(conn, "SELECT id FROM stream_events")) == 1
        return
    assert after.status_code == 202, after.text
    [event] = await rows(
        conn,
        "SELECT status, reason, (SELECT count(*) FROM deliveries d WHERE d.event_id = e.id) AS n "
        "FROM stream_events e WHERE client_id = '2'",
    )
    if expected.startswith("quarantined"):
        assert f"{event['status']} {event['reason']}" == expected
    else:
        assert (event["status"], f"{event['n']} delivery") == ("accepted", expected)
