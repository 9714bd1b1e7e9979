"""The schema check of the submit path, through `POST /s/{form}` and `/v1`: `enforce`
quarantines (and never refuses), `observe` accepts and records drift aggregated, formats
are checked, suggestions never become current by themselves, a broken stored schema costs
no submission, and a kept form never outlives a failure."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import httpx
import pytest

from core.intake import checks
from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from core.ticks.retention import run_retention
from tests.support.api import api_client, assert_problem
from tests.support.builders import Tenant, add_schema, setup_form
from tests.support.records import rows
from tests.support.submit import submit_client

JSON_ACCEPT = {"Accept": "application/json"}
EMAIL_REQUIRED = {
    "type": "object",
    "required": ["email"],
    "properties": {"email": {"type": "string", "format": "email"}},
}


async def _post(client: httpx.AsyncClient, form: str, values: dict[str, Any]) -> httpx.Response:
    return await client.post(f"/s/{form}", json=values, headers=JSON_ACCEPT)


async def _statuses(conn: Conn) -> list[tuple[str, str | None, int | None]]:
    found = await rows(
        conn, "SELECT status, reason, schema_version FROM submissions ORDER BY received_at, id"
    )
    return [(r["status"], r["reason"], r["schema_version"]) for r in found]


async def _owner_schema(
    services: Services, tenant: Tenant, form: str, schema: dict[str, Any]
) -> int:
    async with api_client(services, tenant.key) as api:
        response = await api.post(f"/v1/forms/{form}/schemas", json={"schema": schema})
    assert response.status_code == 201, response.text
    return int(response.json()["version"])


FORMATS = [
    ("email", "a@example.com", "not-an-email"),
    ("uri", "https://example.com/a?b=c", "not a uri"),
    ("date", "2026-12-02", "2026-13-02"),
    ("date-time", "2026-12-02T09:30:00Z", "2026-12-02 nine"),
    ("uuid", "2f1c6f7e-8d3b-4b8a-9c1e-2a3b4c5d6e7f", "2f1c6f7e"),
]


@pytest.mark.parametrize(("fmt", "good", "bad"), FORMATS, ids=[f[0] for f in FORMATS])
async def test_enforce__formats_are_checked(
    services: Services, conn: Conn, fmt: str, good: str, bad: str
) -> None:
    tenant, form = await setup_form(conn, schema_mode="enforce")
    version = await _owner_schema(
        services, tenant, form, {"properties": {"v": {"type": "string", "format": fmt}}}
    )
    async with submit_client(services) as client:
        assert (await _post(client, form, {"v": good})).status_code == 201
        assert (await _post(client, form, {"v": bad})).status_code == 201
    assert await _statuses(conn) == [
        ("accepted", None, version),
        ("quarantined", "schema_violation", version),
    ]
    async with api_client(services, tenant.key) as api:
        drift = (await api.get(f"/v1/forms/{form}/drift")).json()["data"]
    assert [(d["path"], d["keyword"], d["count"]) for d in drift] == [("/v", "format", 1)]


async def test_observe__violations_are_accepted_and_reported_as_drift(
    services: Services, conn: Conn
) -> None:
    tenant, form = await setup_form(conn, schema_mode="observe")
    version = await _owner_schema(services, tenant, form, EMAIL_REQUIRED)
    async with submit_client(services) as client:
        for values in ({"email": "a@example.com"}, {"email": "nope"}, {"name": "no email"}):
            assert (await _post(client, form, values)).status_code == 201
    assert await _statuses(conn) == [("accepted", None, version)] * 3
    async with api_client(services, tenant.key) as api:
        drift = (await api.get(f"/v1/forms/{form}/drift")).json()
    assert drift["next_cursor"] is None
    assert sorted((d["path"], d["keyword"], d["count"]) for d in drift["data"]) == [
        ("/", "required", 1),
        ("/email", "format", 1),
    ]
    for row in drift["data"]:
        assert row["first_seen"] == row["last_seen"]
    events = await rows(conn, "SELECT data FROM events WHERE type = 'schema.drift' ORDER BY id")
    assert [e["data"]["errors"] for e in events] == [
        [{"path": "/email", "keyword": "format"}],
        [{"path": "/", "keyword": "required"}],
    ]
    assert {e["data"]["mode"] for e in events} == {"observe"}
    # Never a value: the drift records hold paths and keywords only.
    assert "nope" not in str(events) and "no email" not in str(drift)


async def test_observe__a_flood_of_violations_writes_one_event_per_rule(
    services: Services, conn: Conn
) -> None:
    tenant, form = await setup_form(conn, schema_mode="observe", rate_limit_max=1000)
    await _owner_schema(services, tenant, form, EMAIL_REQUIRED)
    posts = 500

    async with submit_client(services) as client:

        async def post_batch(start: int) -> list[int]:
            return [
                (await _post(client, form, {"email": f"bad-{i}"})).status_code
                for i in range(start, start + posts // 10)
            ]

        answers = await asyncio.gather(*(post_batch(i * posts // 10) for i in range(10)))
    assert [code for batch in answers for code in batch] == [201] * posts
    counted = await rows(conn, "SELECT count(*) AS n, sum(count) AS c FROM schema_drift")
    assert counted == [{"n": 1, "c": posts}]
    events = await rows(conn, "SELECT data FROM events WHERE type = 'schema.drift'")
    assert len(events) == 1
    assert events[0]["data"]["errors"] == [{"path": "/email", "keyword": "format"}]


async def test_suggestion__never_replaces_the_owners_schema_until_adopted(
    services: Services, conn: Conn
) -> None:
    tenant, form = await setup_form(conn, schema_mode="observe")
    owners = await _owner_schema(services, tenant, form, EMAIL_REQUIRED)
    async with submit_client(services) as client:
        for i in range(5):
            assert (await _post(client, form, {"name": f"N{i}"})).status_code == 201
    stats = await run_retention(services, now=utcnow() + timedelta(seconds=1), budget=10)
    assert stats["schemas_inferred"] == 1
    async with api_client(services, tenant.key) as api:
        listed = (await api.get(f"/v1/forms/{form}/schemas")).json()["data"]
        assert [(s["version"], s["source"]) for s in listed] == [
            (owners, "manual"),
            (owners + 1, "suggested"),
        ]
        assert listed[1]["schema"]["required"] == ["name"]
        patched = await api.patch(f"/v1/forms/{form}", json={"schema_mode": "enforce"})
        assert patched.status_code == 200, patched.text
    # Enforced: the owner's schema (email required), not the suggestion (name required).
    async with submit_client(services, client=("198.51.100.8", 4000)) as client:
        assert (await _post(client, form, {"name": "Ada"})).status_code == 201
    assert (await _statuses(conn))[-1] == ("quarantined", "schema_violation", owners)

    async with api_client(services, tenant.key) as api:
        adopted = await api.post(f"/v1/forms/{form}/schemas/{owners + 1}/adopt")
        assert adopted.status_code == 201, adopted.text
        assert adopted.json()["source"] == "manual"
        assert adopted.json()["schema"] == listed[1]["schema"]
        assert adopted.json()["version"] == owners + 2
        missing = await api.post(f"/v1/forms/{form}/schemas/99/adopt")
        assert_problem(missing, 404, "not_found")
    async with submit_client(services, client=("198.51.100.9", 4000)) as client:
        assert (await _post(client, form, {"name": "Ada"})).status_code == 201
    assert (await _statuses(conn))[-1] == ("accepted", None, owners + 2)


async def test_suggestion__enforce_without_an_owners_schema_checks_nothing_observe_reports(
    services: Services, conn: Conn
) -> None:
    tenant, form = await setup_form(conn, schema_mode="enforce")
    await add_schema(conn, tenant, form, {"required": ["email"]}, source="suggested")
    async with submit_client(services) as client:
        assert (await _post(client, form, {"name": "Ada"})).status_code == 201
        await conn.execute("UPDATE forms SET schema_mode = 'observe' WHERE id = %s", (form,))
        assert (await _post(client, form, {"name": "Bob"})).status_code == 201
    assert [s[:2] for s in await _statuses(conn)] == [("accepted", None), ("accepted", None)]
    drift = await rows(conn, "SELECT path, keyword, count FROM schema_drift")
    assert drift == [{"path": "/", "keyword": "required", "count": 1}]


async def test_stored_ref_typo__posts_are_quarantined_until_the_owner_fixes_it(
    services: Services, conn: Conn
) -> None:
    # Saved before today's limits (an upgraded database can hold one): inserted with SQL.
    tenant, form = await setup_form(conn, schema_mode="enforce")
    broken = await add_schema(conn, tenant, form, {"$ref": "#/$defs/emial"})
    async with submit_client(services) as client:
        for i in range(2):  # the second post uses the form kept from the first
            assert (await _post(client, form, {"email": f"{i}@example.com"})).status_code == 201
        assert await _statuses(conn) == [("quarantined", "schema_error", broken)] * 2

        fixed = await _owner_schema(services, tenant, form, EMAIL_REQUIRED)
        assert (await _post(client, form, {"email": "a@example.com"})).status_code == 201
        assert (await _statuses(conn))[-1] == ("accepted", None, fixed)

        await add_schema(conn, tenant, form, {"$ref": "#/$defs/emial"})
        async with api_client(services, tenant.key) as api:
            off = await api.patch(f"/v1/forms/{form}", json={"schema_mode": "off"})
            assert off.status_code == 200
            assert (await _post(client, form, {"email": "b@example.com"})).status_code == 201
            assert (await _statuses(conn))[-1] == ("accepted", None, None)
            assert (await api.delete(f"/v1/forms/{form}")).status_code == 204
        gone = await _post(client, form, {"email": "c@example.com"})
    assert_problem(gone, 404, "not_found")
    drift = await rows(conn, "SELECT keyword, count FROM schema_drift")
    assert drift == [{"keyword": "schema_error", "count": 2}]


async def test_stored_ref_cycle__posts_get_a_status(services: Services, conn: Conn) -> None:
    tenant, form = await setup_form(conn, schema_mode="enforce")
    cycle = {"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}}
    await add_schema(conn, tenant, form, cycle)
    async with submit_client(services) as client:
        assert (await _post(client, form, {"email": "a@example.com"})).status_code == 201
    [(status, _, _)] = await _statuses(conn)
    assert status in ("accepted", "quarantined")


async def test_kept_form__dropped_after_a_failure_and_read_again(
    services: Services, conn: Conn, monkeypatch: pytest.MonkeyPatch
) -> None:
    tenant, form = await setup_form(conn, schema_mode="enforce")
    await _owner_schema(services, tenant, form, EMAIL_REQUIRED)
    async with submit_client(services) as client:
        assert (await _post(client, form, {"email": "a@example.com"})).status_code == 201
        # Fault injection: the next check fails with something unexpected, once.
        decide = checks.schema_decision
        failures: list[str] = []

        async def failing_once(form_: Any, values: Any) -> checks.Decision:
            if not failures:
                failures.append("kept" if form_.kept else "fresh")
                raise RuntimeError("injected")
            failures.append("kept" if form_.kept else "fresh")
            return await decide(form_, values)

        monkeypatch.setattr(checks, "schema_decision", failing_once)
        assert (await _post(client, form, {"email": "b@example.com"})).status_code == 201
        # The kept form was dropped: the retry read it, and the next post keeps it again.
        assert (await _post(client, form, {"email": "c@example.com"})).status_code == 201
    assert failures == ["kept", "fresh", "kept"]
    assert [s[:2] for s in await _statuses(conn)] == [("accepted", None)] * 3


async def test_inference__long_values_get_no_format_and_are_not_read_twice(
    services: Services, conn: Conn
) -> None:
    _, form = await setup_form(conn, schema_mode="observe")
    hostile = "a@" + "." * 35000 + " "
    async with submit_client(services) as client:
        assert (await _post(client, form, {"contact": hostile})).status_code == 201
    now = utcnow() + timedelta(seconds=1)
    assert (await run_retention(services, now=now, budget=10))["schemas_inferred"] == 1
    [suggested] = await rows(conn, "SELECT schema FROM form_schemas")
    assert suggested["schema"]["properties"] == {"contact": {"type": "string"}}
    [scanned] = await rows(conn, "SELECT scanned_through FROM schema_inference")
    # Nothing new: the next pass does not read the form again.
    later = now + timedelta(minutes=1)
    assert (await run_retention(services, now=later, budget=10))["schemas_inferred"] == 0
    assert await rows(conn, "SELECT scanned_through FROM schema_inference") == [scanned]
