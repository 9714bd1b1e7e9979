"""The retention tick's housekeeping: schema inference, health rollup, quota release."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from core.platform.clock import month_of, utcnow
from core.platform.db import Conn
from core.platform.services import Services
from core.ticks.retention import run_retention
from tests.support.api import api_client
from tests.support.builders import (
    Tenant,
    add_attempt,
    make_delivery,
    make_form,
    make_route_to,
    make_submission,
    make_tenant,
    setup_form,
)
from tests.support.cli import postbag, subprocess_env
from tests.support.records import rows
from tests.support.submit import submit_client

JSON_ACCEPT = {"Accept": "application/json"}


async def _accepted(
    conn: Conn, tenant: Tenant, form: str, values: list[dict[str, Any]], at: Any
) -> None:
    for item in values:
        await make_submission(conn, tenant, form, item, received_at=at)


async def test_inference__stable_shape_one_version_new_field_version_2(
    services: Services, conn: Conn
) -> None:
    tenant = await make_tenant(conn)
    form = await make_form(conn, tenant, schema_mode="observe")
    other = await make_form(conn, tenant, schema_mode="off")
    start = utcnow()
    stable = [{"name": f"P{i}", "email": f"p{i}@example.com"} for i in range(50)]
    await _accepted(conn, tenant, form, stable, start - timedelta(minutes=10))
    await _accepted(conn, tenant, other, stable[:3], start - timedelta(minutes=10))

    stats = await run_retention(services, now=start, budget=10)
    assert stats["schemas_inferred"] == 1
    versions = await rows(conn, "SELECT form_id, version, source, schema FROM form_schemas")
    assert [(v["form_id"], v["version"], v["source"]) for v in versions] == [(form, 1, "suggested")]
    schema = versions[0]["schema"]
    assert schema["properties"] == {
        "email": {"type": "string", "format": "email"},
        "name": {"type": "string"},
    }
    assert schema["required"] == ["email", "name"]

    # Nothing new, or the same shape again: nothing appended.
    later = start + timedelta(minutes=1)
    assert (await run_retention(services, now=later, budget=10))["schemas_inferred"] == 0
    await _accepted(conn, tenant, form, stable[:5], later)
    later2 = later + timedelta(minutes=1)
    assert (await run_retention(services, now=later2, budget=10))["schemas_inferred"] == 0

    grown = [{**item, "phone": "+441234"} for item in stable[:20]]
    await _accepted(conn, tenant, form, grown, later2)
    later3 = later2 + timedelta(minutes=1)
    assert (await run_retention(services, now=later3, budget=10))["schemas_inferred"] == 1
    [v2] = await rows(conn, "SELECT version, source, schema FROM form_schemas WHERE version = 2")
    assert v2["source"] == "suggested" and "phone" in v2["schema"]["properties"]
    events = await rows(
        conn, "SELECT subject_id, data FROM events WHERE type = 'schema.suggested' ORDER BY id"
    )
    assert events == [
        {"subject_id": form, "data": {"form": form, "version": 1}},
        {"subject_id": form, "data": {"form": form, "version": 2}},
    ]
    async with api_client(services, tenant.key) as api:
        listed = (await api.get(f"/v1/forms/{form}/schemas")).json()["data"]
    assert [(s["version"], s["source"]) for s in listed] == [(1, "suggested"), (2, "suggested")]


async def test_health_rollup__success_rate_and_p95_in_the_destination(
    services: Services, conn: Conn
) -> None:
    tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
    dst, rte = await make_route_to(conn, tenant, form, config={"url": "https://example.com/h"})
    _, dlv = await make_delivery(
        conn, tenant, form, dst, rte, target={"url": "https://example.com/h"}
    )
    now = utcnow()
    for n in range(20):
        outcome = "failed" if n < 5 else "sent"
        at = now - timedelta(minutes=n)
        await add_attempt(
            conn, tenant, dlv, attempt=n + 1, at=at, duration_ms=(n + 1) * 10, outcome=outcome
        )
    # Older than a day: left out.
    old = now - timedelta(hours=25)
    await add_attempt(conn, tenant, dlv, attempt=99, at=old, duration_ms=99999, outcome="failed")
    await run_retention(services, now=now, budget=10)
    [row] = await rows(conn, "SELECT health_stats FROM destinations")
    stats = row["health_stats"]
    assert stats["attempts"] == 20
    assert stats["success_rate"] == 0.75
    assert stats["p95_duration_ms"] == 191

    async with api_client(services, tenant.key) as api:
        body = (await api.get(f"/v1/destinations/{dst}")).json()
    assert body["health_stats"]["success_rate"] == 0.75


async def test_quota__over_quota_deliveries_held_then_released_after_set_plan(
    services: Services, conn: Conn, db_url: str
) -> None:
    tenant, form = await setup_form(conn, plan="free")
    now = utcnow()
    await conn.execute(
        "INSERT INTO usage_counters (organization_id, month, submissions)"
        " VALUES (%(org)s, %(month)s, 100)",
        {"org": tenant.org, "month": month_of(now)},
    )
    async with submit_client(services) as client:
        response = await client.post(f"/s/{form}", data={"name": "Ada"}, headers=JSON_ACCEPT)
    assert response.status_code == 201
    [sub] = await rows(conn, "SELECT flags FROM submissions")
    assert sub["flags"] == ["over_quota"]
    [dlv] = await rows(conn, "SELECT held, status FROM deliveries")
    assert (dlv["held"], dlv["status"]) == (True, "pending")
    assert (await run_retention(services, now=now, budget=10))["released"] == 0

    result = postbag("set-plan", tenant.org, "pro", env=subprocess_env(POSTBAG_DATABASE_URL=db_url))
    assert result.returncode == 0, result.stderr
    assert (await run_retention(services, now=now, budget=10))["released"] == 1
    [dlv] = await rows(conn, "SELECT held, status FROM deliveries")
    assert (dlv["held"], dlv["status"]) == (False, "pending")
