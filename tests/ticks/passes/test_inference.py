"""The inference pass appends a suggested schema version when an `observe` form's
observed shape changed, and stops at the plan's schema versions."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from core.ticks.retention import run_retention
from tests.support.api import api_client
from tests.support.builders import (
    Tenant,
    add_schema,
    make_form,
    make_submission,
    make_tenant,
)
from tests.support.records import rows


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
