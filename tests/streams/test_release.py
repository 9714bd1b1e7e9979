"""Releasing a quarantined stream event (`/v1` and the dashboard; the MCP tool is in
tests/http/agents/test_mcp.py), the refusals' words, and the stream page's routes and schema
versions."""

from __future__ import annotations

from typing import Any

import httpx

from core.platform.db import Conn
from core.platform.services import Services
from tests.streams.test_ingest import ingest_headers, new_stream
from tests.support.api import WEBHOOK, api_client, assert_problem, create
from tests.support.builders import Tenant, make_tenant
from tests.support.dashboard import dashboard_client, sign_in
from tests.support.records import rows

ORDER = {
    "type": "object",
    "properties": {"order": {"type": "integer"}, "total": {"type": "number", "minimum": 1}},
    "required": ["order", "total"],
    "additionalProperties": False,
}
BROKEN = {"order": 7, "total": 0, "coupon": "FREE"}


async def _quarantined_stream(client: httpx.AsyncClient, acme: Tenant) -> dict[str, Any]:
    """An enforcing stream with ORDER for `order.paid`, a route taking that type, a route
    taking only `refund` events, and one quarantined `order.paid` event (`event` in it)."""
    stream = await new_stream(client, acme, schema_mode="enforce")
    path = f"/v1/streams/{stream['id']}"
    schema = {"schema": ORDER, "event_type": "order.paid"}
    await create(client, acme, f"{path}/schemas", schema)
    hook = await create(client, acme, "/v1/destinations", {**WEBHOOK, "name": "Orders hook"})
    refunds = await create(client, acme, "/v1/destinations", {**WEBHOOK, "name": "Refunds"})
    routed = {"destination_id": hook["id"], "event_types": ["order.paid"]}
    stream["route"] = await create(client, acme, f"{path}/routes", routed)
    refund_route = {"destination_id": refunds["id"], "event_types": ["refund"]}
    await create(client, acme, f"{path}/routes", refund_route)
    posted = await client.post(
        f"{path}/events",
        json={"id": "o-7", "type": "order.paid", "data": BROKEN},
        headers=ingest_headers(stream),
    )
    assert posted.status_code == 202, posted.text
    stream["posted"] = posted.json()
    return stream


async def test_ingest__a_violation_names_the_field_and_the_limit(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn)
    async with api_client(services) as client:
        stream = await _quarantined_stream(client, acme)
        event = stream["posted"]["event"]
        stored = await client.get(
            f"/v1/streams/{stream['id']}/events/{event}", headers=acme.headers
        )
    assert stream["posted"]["status"] == "quarantined"
    expected = [
        {
            "path": "/",
            "keyword": "additionalProperties",
            "field": "coupon",
            "message": "`coupon` is not allowed",
        },
        {"path": "/total", "keyword": "minimum", "field": "total", "message": "`total` is below 1"},
    ]
    assert stream["posted"]["errors"] == expected
    assert stored.json()["errors"] == expected
    # What the data broke is named from the schema's side: never the value itself.
    assert "FREE" not in repr(expected)


async def test_release__a_quarantined_event_is_delivered_once_by_the_routes_of_its_type(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn)
    async with api_client(services) as client:
        stream = await _quarantined_stream(client, acme)
        event = stream["posted"]["event"]
        path = f"/v1/streams/{stream['id']}/events/{event}"
        released = await client.post(f"{path}/release", headers=acme.headers)
        again = await client.post(f"{path}/release", headers=acme.headers)
        feed = await client.get("/v1/events", headers=acme.headers)
    assert released.status_code == 200, released.text
    body = released.json()
    assert (body["status"], body["reason"]) == ("accepted", None)
    assert body["released_at"] is not None and body["data"] == BROKEN
    # What it broke stays; only the route taking `order.paid` delivers it, once.
    assert [e["field"] for e in body["errors"]] == ["coupon", "total"]
    assert [d["destination_id"] for d in body["deliveries"]] == [stream["route"]["destination_id"]]
    assert_problem(again, 409, "already_released")
    [seen] = [e for e in feed.json()["data"] if e["type"] == "stream_event.released"]
    assert seen["subject"] == event
    assert seen["data"] == {
        "stream": stream["id"],
        "from_status": "quarantined",
        "from_reason": "schema_violation",
        "deliveries": 1,
    }
    recorded = await rows(
        conn,
        "SELECT action, subject FROM audit_log WHERE organization_id = %(o)s"
        " AND action = 'stream_event.released'",
        o=acme.org,
    )
    assert recorded == [{"action": "stream_event.released", "subject": event}]
    queued = await rows(conn, "SELECT status FROM deliveries WHERE event_id = %(e)s", e=event)
    assert queued == [{"status": "pending"}]


async def test_release__accepted_erased_and_unknown_events_are_refused(
    services: Services, conn: Conn
) -> None:
    acme, other = await make_tenant(conn), await make_tenant(conn, "Other")
    async with api_client(services) as client:
        stream = await _quarantined_stream(client, acme)
        base = f"/v1/streams/{stream['id']}/events"
        quarantined = stream["posted"]["event"]
        good = await client.post(
            base,
            json={"type": "order.paid", "data": {"order": 1, "total": 5}},
            headers=ingest_headers(stream),
        )
        accepted = good.json()["event"]
        erased = await client.post(f"{base}/{quarantined}/erase", headers=acme.headers)
        assert erased.status_code == 204
        after_erase = await client.post(f"{base}/{quarantined}/release", headers=acme.headers)
        from_start = await client.post(f"{base}/{accepted}/release", headers=acme.headers)
        foreign = await client.post(f"{base}/{accepted}/release", headers=other.headers)
    assert_problem(after_erase, 409, "values_erased")
    problem = assert_problem(from_start, 409, "already_released")
    assert "accepted" in problem["detail"]
    assert_problem(foreign, 404, "not_found")


async def test_stream_page__routes_schema_versions_and_the_release_button(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn)
    async with api_client(services) as client:
        stream = await _quarantined_stream(client, acme)
    event = stream["posted"]["event"]
    async with dashboard_client(services) as viewer:
        await sign_in(viewer, acme.key, role="viewer")
        seen_by_viewer = (await viewer.get(f"/app/streams/{stream['id']}/events/{event}")).text
    async with dashboard_client(services) as owner:
        csrf = await sign_in(owner, acme.key)
        page = (await owner.get(f"/app/streams/{stream['id']}")).text
        shown = await owner.get(f"/app/streams/{stream['id']}/events/{event}")
        released = await owner.post(
            f"/app/streams/{stream['id']}/events/{event}/release", data={"csrf": csrf}
        )
        after = (await owner.get(f"/app/streams/{stream['id']}/events/{event}")).text
    routes = page.split("<h2>Routes</h2>", 1)[1].split("<h2>", 1)[0]
    assert "Orders hook" in routes and "<code>order.paid</code>" in routes
    assert "Refunds" in routes and "<code>refund</code>" in routes
    versions = page.split("<h2>Schema versions</h2>", 1)[1].split("<h2>", 1)[0]
    assert "<td>1</td>" in versions and "manual" in versions and "Yes" in versions
    assert "`coupon` is not allowed" in shown.text and "`total` is below 1" in shown.text
    assert "/release" in shown.text and "/release" not in seen_by_viewer
    assert released.status_code == 303
    assert "· released" in after and "/release" not in after
