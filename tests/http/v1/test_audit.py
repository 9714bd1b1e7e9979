"""The audit trail through `/v1` and `/mcp`: a row for each change and each read of visitors'
data, with the actor, the surface and the client; never a value; filtered and paged."""

from __future__ import annotations

from typing import Any

import httpx

from core.owner.audit import verify_chain
from core.platform.db import Conn
from core.platform.services import Services
from tests.support.api import WEBHOOK, api_client, assert_problem, create
from tests.support.builders import make_tenant, setup_form
from tests.support.files import pdf
from tests.support.records import failing_audit, rows
from tests.support.submit import submit_client

SECRET_VALUE = "Ada-visitor-7731"


async def _audit(client: httpx.AsyncClient, **params: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    cursor = None
    while True:
        answer = await client.get("/v1/audit", params={**params, "cursor": cursor, "limit": 7})
        assert answer.status_code == 200, answer.text
        page = answer.json()
        found.extend(page["data"])
        cursor = page["next_cursor"]
        if cursor is None:
            return found


async def test_every_change_and_read_of_values_is_one_row_without_values(
    services: Services, conn: Conn
) -> None:
    tenant, form = await setup_form(conn, file_fields={"cv": {"types": [".pdf"], "max_files": 1}})
    async with submit_client(services) as visitor:
        posted = await visitor.post(
            f"/s/{form}",
            data={"name": SECRET_VALUE},
            files=[("cv", ("cv.pdf", pdf(), "application/pdf"))],
            headers={"Accept": "application/json"},
        )
    assert posted.status_code == 201, posted.text
    receipt = posted.json()["receipt"]
    [attachment] = await rows(conn, "SELECT id FROM attachments")
    [dead] = await rows(
        conn,
        "UPDATE deliveries SET status = 'dead', reason = 'http_404' WHERE submission_id = %(s)s"
        " RETURNING id",
        s=receipt,
    )
    destination_row = dead["id"]

    async with api_client(services, tenant.key) as client:
        client.headers["User-Agent"] = "audit-test/1"
        made = await create(client, tenant, "/v1/forms", {"name": "Survey"})
        assert (await client.patch(f"/v1/forms/{made['id']}", json={"name": "Poll"})).is_success
        dst = await create(client, tenant, "/v1/destinations", WEBHOOK)
        rotated = await client.patch(
            f"/v1/destinations/{dst['id']}", json={"secret": "whsec_" + "A" * 32}
        )
        assert rotated.status_code == 200, rotated.text
        route = await create(
            client, tenant, f"/v1/forms/{form}/routes", {"destination_id": dst["id"]}
        )
        assert (await client.delete(f"/v1/routes/{route['id']}")).status_code == 204
        key = await create(client, tenant, "/v1/keys", {"name": "ops", "role": "operator"})
        assert (await client.delete(f"/v1/keys/{key['id']}")).status_code == 204
        assert (await client.get(f"/v1/submissions/{receipt}")).status_code == 200
        download = await client.get(f"/v1/submissions/{receipt}/attachments/{attachment['id']}")
        assert download.status_code == 200
        export = await client.get("/v1/submissions/export.csv", params={"form": form})
        assert SECRET_VALUE in export.text
        retried = await client.post(f"/v1/deliveries/{destination_row}/retry")
        assert retried.status_code == 200, retried.text
        replay = {"since": "2020-01-01T00:00:00Z", "dry_run": True}
        assert (await client.post("/v1/deliveries/replay", json=replay)).status_code == 200
        assert (await client.post(f"/v1/submissions/{receipt}/spam")).status_code == 200
        assert (await client.post(f"/v1/submissions/{receipt}/release")).status_code == 200
        assert (await client.post(f"/v1/submissions/{receipt}/erase")).status_code == 200
        assert (await client.delete(f"/v1/forms/{made['id']}")).status_code == 204
        # Reads without values leave no row.
        assert (await client.get("/v1/forms")).status_code == 200
        assert (await client.get("/v1/submissions")).status_code == 200

        trail = await _audit(client)

    assert [(row["action"], row["subject"]) for row in reversed(trail)] == [
        ("form.created", made["id"]),
        ("form.updated", made["id"]),
        ("destination.created", dst["id"]),
        ("destination.secret_rotated", dst["id"]),
        ("route.created", route["id"]),
        ("route.deleted", route["id"]),
        ("key.created", key["id"]),
        ("key.revoked", key["id"]),
        ("submission.read", receipt),
        ("attachment.downloaded", receipt),
        ("export.downloaded", form),
        ("delivery.retried", destination_row),
        ("submission.marked_spam", receipt),
        ("submission.released", receipt),
        ("submission.erased", receipt),
        ("form.deleted", made["id"]),
    ]
    [test_key] = await rows(conn, "SELECT id FROM api_keys WHERE name = 'test'")
    for row in trail:
        assert row["actor"] == {"kind": "key", "id": test_key["id"], "name": "test"}
        assert (row["via"], row["ip"], row["user_agent"]) == ("api", "127.0.0.1", "audit-test/1")
    assert [row["seq"] for row in trail] == list(range(len(trail), 0, -1))
    stored = await rows(conn, "SELECT * FROM audit_log")
    assert SECRET_VALUE not in repr(stored) and "whsec_" not in repr(stored)
    report = await verify_chain(conn, tenant.org)
    assert (report.rows, report.broken_id) == (len(trail), None)


async def test_the_list_filters_by_actor_action_subject_and_time(
    services: Services, conn: Conn
) -> None:
    tenant = await make_tenant(conn)
    other = await make_tenant(conn, "Other")
    async with api_client(services, tenant.key) as client:
        first = await create(client, tenant, "/v1/forms", {"name": "A"})
        ops = await create(client, tenant, "/v1/keys", {"name": "ops", "role": "admin"})
        client.headers["Authorization"] = f"Bearer {ops['key']}"
        second = (await client.post("/v1/forms", json={"name": "B"})).json()
        assert [r["subject"] for r in await _audit(client, action="form.created")] == [
            second["id"],
            first["id"],
        ]
        assert [r["action"] for r in await _audit(client, actor="ops")] == ["form.created"]
        assert [r["action"] for r in await _audit(client, actor=ops["id"])] == ["form.created"]
        assert [r["action"] for r in await _audit(client, subject=first["id"])] == ["form.created"]
        assert await _audit(client, since="2999-01-01T00:00:00Z") == []
        assert len(await _audit(client, since="2000-01-01T00:00:00Z")) == 3
        malformed = await client.get("/v1/audit", params={"cursor": "WyJ4Il0"})
        assert_problem(malformed, 422, "invalid_input")
    async with api_client(services, other.key) as theirs:
        assert await _audit(theirs) == []


async def test_mcp_reads_of_values_are_recorded_as_mcp_with_the_callers_client(
    services: Services, conn: Conn
) -> None:
    tenant, form = await setup_form(conn, routes=0)
    async with submit_client(services) as visitor:
        posted = await visitor.post(
            f"/s/{form}", data={"name": SECRET_VALUE}, headers={"Accept": "application/json"}
        )
    receipt = posted.json()["receipt"]
    async with api_client(services, tenant.key) as client:
        call = {"name": "get_submission", "arguments": {"submission_id": receipt}}
        answer = await client.post(
            "/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call},
            headers={
                "Accept": "application/json, text/event-stream",
                "MCP-Protocol-Version": "2025-06-18",
                "User-Agent": "an-assistant/2",
            },
        )
        assert SECRET_VALUE in answer.text
        [row] = await _audit(client)
    assert (row["action"], row["subject"], row["via"]) == ("submission.read", receipt, "mcp")
    assert (row["ip"], row["user_agent"]) == ("127.0.0.1", "an-assistant/2")


async def _stored(conn: Conn) -> dict[str, int]:
    counted = await rows(
        conn,
        "SELECT (SELECT count(*) FROM forms WHERE deleted_at IS NULL) AS forms,"
        " (SELECT count(*) FROM destinations WHERE deleted_at IS NULL) AS destinations,"
        " (SELECT count(*) FROM api_keys WHERE revoked_at IS NULL) AS keys,"
        " (SELECT count(*) FROM audit_log) AS audit",
    )
    return counted[0]


async def test_a_change_and_its_audit_row_commit_together_or_not_at_all(
    services: Services, conn: Conn
) -> None:
    tenant, form = await setup_form(conn)
    calls = [
        ("POST", "/v1/forms", {"name": "Survey"}, "form.created"),
        ("POST", "/v1/destinations", WEBHOOK, "destination.created"),
        ("POST", "/v1/keys", {"name": "ops", "role": "viewer"}, "key.created"),
        ("DELETE", f"/v1/forms/{form}", None, "form.deleted"),
    ]
    async with api_client(services, tenant.key) as client:
        for method, path, body, action in calls:
            before = await _stored(conn)
            async with failing_audit(conn):
                failed = await client.request(method, path, json=body)
                assert failed.status_code == 503, (path, failed.text)
                assert failed.headers["retry-after"]
                assert await _stored(conn) == before, path

            made = await client.request(method, path, json=body)
            assert made.is_success, (path, made.text)
            after = await _stored(conn)
            assert after["audit"] == before["audit"] + 1, path
            [row] = await rows(
                conn, "SELECT action, subject FROM audit_log ORDER BY seq DESC LIMIT 1"
            )
            subject = made.json()["id"] if made.status_code == 201 else form
            assert (row["action"], row["subject"]) == (action, subject)


async def test_a_form_update_names_what_it_changed_never_the_values(
    services: Services, conn: Conn
) -> None:
    tenant, form = await setup_form(conn)
    async with api_client(services, tenant.key) as client:
        # The name changes, the retention is given as it is, and a write-only secret is set.
        current = (await client.get(f"/v1/forms/{form}")).json()
        patched = await client.patch(
            f"/v1/forms/{form}",
            json={
                "name": "Renamed-7731",
                "retention_days": current["retention_days"],
                "turnstile_secret": "0x4AAAAAAA-secret-7731",
            },
        )
        assert patched.status_code == 200, patched.text
        [row] = await _audit(client, action="form.updated")
    assert (row["subject"], row["changed"]) == (form, ["name", "turnstile_secret"])
    stored = await rows(conn, "SELECT * FROM audit_log")
    assert "7731" not in repr(stored)
    report = await verify_chain(conn, tenant.org)
    assert (report.rows, report.broken_id) == (1, None)


async def test_a_streams_first_ingest_key_is_recorded(services: Services, conn: Conn) -> None:
    tenant = await make_tenant(conn)
    async with api_client(services, tenant.key) as client:
        made = await client.post("/v1/streams", json={"name": "Orders"})
        assert made.status_code == 201, made.text
        trail = await _audit(client)
    stream = made.json()
    assert [(r["action"], r["subject"]) for r in reversed(trail)] == [
        ("ingest_key.created", stream["ingest_key"]["id"]),
        ("stream.created", stream["id"]),
    ]
    assert stream["ingest_key"]["key"] not in repr(await rows(conn, "SELECT * FROM audit_log"))


async def test_reading_a_submission_again_soon_is_the_same_read(
    services: Services, conn: Conn
) -> None:
    tenant, form = await setup_form(conn)
    async with submit_client(services) as visitor:
        posted = await visitor.post(f"/s/{form}", json={"name": SECRET_VALUE})
    receipt = posted.json()["receipt"]
    async with api_client(services, tenant.key) as client:
        for _ in range(2):
            assert (await client.get(f"/v1/submissions/{receipt}")).status_code == 200
        assert (await client.post(f"/v1/submissions/{receipt}/spam")).status_code == 200
        assert (await client.get(f"/v1/submissions/{receipt}")).status_code == 200
        trail = await _audit(client)
    assert [r["action"] for r in reversed(trail)] == ["submission.read", "submission.marked_spam"]
