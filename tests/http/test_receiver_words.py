"""A receiver's words are values: a chat service that quotes the refused message in its error
has that text kept only in the attempt's excerpt, which the operator reads (recorded in
the audit trail); every other reader sees the class (`http_400`)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from core.destinations.chat import redact_url
from core.outbox.worker import Deliverer, WorkerOptions
from core.owner.organizations import create_api_key
from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from tests.support.api import api_client
from tests.support.builders import Tenant, make_route_to, setup_form
from tests.support.dashboard import dashboard_client, sign_in
from tests.support.peers import Answer, Request, receiver
from tests.support.records import rows
from tests.support.submit import submit_client

SECRET_VALUE = "Wq4Visitor-private-8812"
MIGRATION = Path(__file__).parents[2] / "migrations" / "0036_delivery_detail_classes.sql"


def _quoting_refusal(request: Request) -> Answer:
    """Slack's way of refusing a message, quoting the message it refused."""
    blocks = json.loads(request.body)["blocks"]
    quoted = " ".join(b["text"]["text"] for b in blocks if b["type"] == "section")
    return 400, {}, f"invalid_blocks: {quoted}".encode()


async def _refused(services: Services, conn: Conn) -> tuple[Tenant, str, str]:
    """A submission whose Slack delivery the receiver refused quoting its value; returns the
    tenant, the receipt and the delivery."""
    tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
    with receiver(_quoting_refusal) as chat:
        url = f"{chat.url}/services/T0/B0/secret"
        await make_route_to(
            conn, tenant, form, type="slack", config={"url": redact_url(url)}, secrets=(url,)
        )
        async with submit_client(services) as visitor:
            posted = await visitor.post(
                f"/s/{form}",
                json={"name": SECRET_VALUE},
                headers={"Accept": "application/json"},
            )
        assert posted.status_code == 201, posted.text
        await Deliverer(services, options=WorkerOptions(timeout=2)).run_pass(now=utcnow(), budget=5)
    assert SECRET_VALUE.encode() in chat.requests[0].body
    [dead] = await rows(conn, "SELECT id, status FROM deliveries")
    assert dead["status"] == "dead"
    return tenant, posted.json()["receipt"], dead["id"]


async def _key(conn: Conn, tenant: Tenant, role: str) -> dict[str, str]:
    made = await create_api_key(conn, tenant.scope, name=role, role=role)  # type: ignore[arg-type]
    return {"Authorization": f"Bearer {made.secret}"}


async def test_a_viewer_reads_the_class_of_a_refusal_never_the_receivers_words(
    services: Services, conn: Conn
) -> None:
    tenant, receipt, dlv = await _refused(services, conn)
    viewer = await _key(conn, tenant, "viewer")
    async with api_client(services, tenant.key) as api:
        api.headers.update(viewer)
        listed = await api.get("/v1/deliveries")
        events = await api.get("/v1/events")
        alerts = await api.get("/v1/alerts")
        one = await api.get(f"/v1/deliveries/{dlv}")
    answers: dict[str, httpx.Response] = {
        "/v1/deliveries": listed,
        "/v1/events": events,
        "/v1/alerts": alerts,
    }
    for path, answer in answers.items():
        assert answer.status_code == 200, (path, answer.text)
        assert SECRET_VALUE not in answer.text, path
    [row] = listed.json()["data"]
    assert (row["reason"], row["last_detail"]) == ("http_400", "http_400")
    [dead] = [e for e in events.json()["data"] if e["type"] == "delivery.dead"]
    assert dead["data"]["reason"] == "http_400"
    [alert] = alerts.json()["data"]
    assert alert["detail"] == f"{dlv}: http_400"
    # The history holds the receiver's answer: the viewer may not read it.
    assert (one.status_code, one.json()["needed"]) == (403, "operator")

    async with dashboard_client(services) as page:
        await sign_in(page, tenant.key, role="viewer")
        shown = {
            path: await page.get(path) for path in (f"/app/submissions/{receipt}", "/app/alerts")
        }
    for path, answer in shown.items():
        assert answer.status_code == 200, path
        assert SECRET_VALUE not in answer.text, path
    assert "HTTP 400" in shown[f"/app/submissions/{receipt}"].text
    assert "http 400" in shown["/app/alerts"].text


async def test_an_operator_reads_the_receivers_answer_in_the_history_and_it_is_recorded(
    services: Services, conn: Conn
) -> None:
    tenant, _receipt, dlv = await _refused(services, conn)
    operator = await _key(conn, tenant, "operator")
    async with api_client(services, tenant.key) as api:
        one = await api.get(f"/v1/deliveries/{dlv}", headers=operator)
        trail = (await api.get("/v1/audit", params={"action": "delivery.read"})).json()["data"]
    assert one.status_code == 200, one.text
    [attempt] = one.json()["history"]
    assert attempt["http_status"] == 400
    assert SECRET_VALUE in attempt["response_excerpt"]
    assert one.json()["last_detail"] == "http_400"
    [row] = trail
    assert (row["action"], row["subject"], row["actor"]["name"]) == (
        "delivery.read",
        dlv,
        "operator",
    )
    stored = await rows(conn, "SELECT * FROM audit_log")
    assert SECRET_VALUE not in repr(stored)


async def test_the_migration_rewrites_stored_details_to_their_class(
    services: Services, conn: Conn
) -> None:
    tenant, _receipt, dlv = await _refused(services, conn)
    # As rows written before were: the service's error line after the status.
    said = f"http_400: invalid_blocks: {SECRET_VALUE}"
    await conn.execute(
        "UPDATE deliveries SET reason = %(said)s, last_detail = %(said)s",
        {"said": said},
    )
    await conn.execute(
        "UPDATE events SET data = jsonb_set(data, '{reason}', to_jsonb(%(said)s::text))"
        " WHERE type = 'delivery.dead'",
        {"said": said},
    )
    await conn.execute("UPDATE alerts SET detail = %(detail)s", {"detail": f"{dlv}: {said}"})
    await conn.execute(MIGRATION.read_text().encode())
    viewer = await _key(conn, tenant, "viewer")
    async with api_client(services, tenant.key) as api:
        read = [
            await api.get(path, headers=viewer)
            for path in ("/v1/deliveries", "/v1/events", "/v1/alerts")
        ]
    for answer in read:
        assert answer.status_code == 200, answer.text
        assert SECRET_VALUE not in answer.text
    [row] = read[0].json()["data"]
    assert (row["reason"], row["last_detail"]) == ("http_400", "http_400")
    [alert] = read[2].json()["data"]
    assert alert["detail"] == f"{dlv}: http_400"
