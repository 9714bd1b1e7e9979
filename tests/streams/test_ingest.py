"""Streams through `/v1`: ingest keys and their scope, plan limits, one event at a time
(duplicates, conflicts, idempotency keys, the size cap), and races on one id."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx

from core.platform.db import Conn
from core.platform.services import Services
from tests.support.api import api_client, assert_problem
from tests.support.builders import Tenant, make_tenant
from tests.support.records import rows
from tests.support.settings import built_services, with_settings


async def new_stream(client: httpx.AsyncClient, who: Tenant, **fields: Any) -> dict[str, Any]:
    """A stream made through `/v1` (with its first ingest key)."""
    response = await client.post(
        "/v1/streams", json={"name": "Orders", **fields}, headers=who.headers
    )
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


def ingest_headers(stream: dict[str, Any]) -> dict[str, str]:
    return {"Authorization": f"Bearer {stream['ingest_key']['key']}"}


EVENT = {"id": "order-1", "type": "order.paid", "data": {"order": 1, "total": 9.5}}


async def test_streams__crud_and_the_ingest_key_shown_once(services: Services, conn: Conn) -> None:
    acme = await make_tenant(conn)
    async with api_client(services) as client:
        stream = await new_stream(client, acme, schema_mode="observe", retention_days=30)
        assert stream["id"].startswith("str_")
        assert stream["ingest_key"]["key"].startswith("pbs_")
        assert (stream["schema_mode"], stream["retention_days"], stream["accepting"]) == (
            "observe",
            30,
            True,
        )
        path = f"/v1/streams/{stream['id']}"
        got = (await client.get(path, headers=acme.headers)).json()
        assert "ingest_key" not in got and got["name"] == "Orders"
        keys = (await client.get(f"{path}/keys", headers=acme.headers)).json()["data"]
        assert [k["prefix"] for k in keys] == [stream["ingest_key"]["prefix"]]
        assert "key" not in keys[0]
        patched = await client.patch(path, json={"accepting": False}, headers=acme.headers)
        assert patched.json()["accepting"] is False and patched.json()["retention_days"] == 30
        closed = await client.post(f"{path}/events", json=EVENT, headers=ingest_headers(stream))
        assert_problem(closed, 403, "stream_closed")
        assert (await client.delete(path, headers=acme.headers)).status_code == 204
        assert_problem(await client.get(path, headers=acme.headers), 404, "not_found")
        gone = await client.post(f"{path}/events", json=EVENT, headers=ingest_headers(stream))
        assert_problem(gone, 401, "unauthenticated")


async def test_ingest_key__posts_to_its_stream_only(services: Services, conn: Conn) -> None:
    acme = await make_tenant(conn, plan="pro")
    other = await make_tenant(conn, name="Other")
    async with api_client(services) as client:
        orders = await new_stream(client, acme)
        signups = await new_stream(client, acme, name="Signups")
        key = ingest_headers(orders)
        posted = await client.post(f"/v1/streams/{orders['id']}/events", json=EVENT, headers=key)
        assert posted.status_code == 202, posted.text
        # Anything else with it is 403: reading, listing, another stream.
        for method, path in [
            ("GET", f"/v1/streams/{orders['id']}"),
            ("GET", f"/v1/streams/{orders['id']}/events"),
            ("GET", "/v1/forms"),
            ("POST", "/mcp"),
            ("POST", f"/v1/streams/{signups['id']}/events"),
        ]:
            refused = await client.request(method, path, json=EVENT, headers=key)
            assert_problem(refused, 403, "ingest_key_only")
        # Another organization's stream is 404, with its key; an org key of this one posts.
        foreign = await client.post(
            f"/v1/streams/{orders['id']}/events", json=EVENT, headers=other.headers
        )
        assert_problem(foreign, 404, "not_found")
        by_org = await client.post(
            f"/v1/streams/{orders['id']}/events",
            json={**EVENT, "id": "order-2"},
            headers=acme.headers,
        )
        assert by_org.status_code == 202
        # A second key; revoking the first refuses it at once, the second still posts.
        second = await client.post(
            f"/v1/streams/{orders['id']}/keys", json={"name": "backup"}, headers=acme.headers
        )
        assert second.status_code == 201 and second.json()["key"].startswith("pbs_")
        revoked = await client.delete(
            f"/v1/streams/{orders['id']}/keys/{orders['ingest_key']['id']}", headers=acme.headers
        )
        assert revoked.status_code == 204
        refused = await client.post(
            f"/v1/streams/{orders['id']}/events", json={**EVENT, "id": "x"}, headers=key
        )
        assert_problem(refused, 401, "unauthenticated")
        still = await client.post(
            f"/v1/streams/{orders['id']}/events",
            json={**EVENT, "id": "y"},
            headers={"Authorization": f"Bearer {second.json()['key']}"},
        )
        assert still.status_code == 202


async def test_ingest__accepted_duplicate_and_conflict(services: Services, conn: Conn) -> None:
    acme = await make_tenant(conn)
    async with api_client(services) as client:
        stream = await new_stream(client, acme)
        path = f"/v1/streams/{stream['id']}/events"
        key = ingest_headers(stream)
        first = await client.post(path, json=EVENT, headers=key)
        assert first.status_code == 202
        answer = first.json()
        assert answer["event"].startswith("evt_") and answer["id"] == "order-1"
        assert answer["status"] == "accepted" and "errors" not in answer
        # The same id and payload (keys in another order): the stored event, nothing new.
        reordered = {"data": {"total": 9.5, "order": 1}, "type": "order.paid", "id": "order-1"}
        again = await client.post(path, json=reordered, headers=key)
        assert again.status_code == 202
        assert again.json() == {"event": answer["event"], "id": "order-1", "status": "duplicate"}
        changed = await client.post(path, json={**EVENT, "data": {"order": 2}}, headers=key)
        assert_problem(changed, 409, "idempotency_conflict")
        # Without an id, Idempotency-Key stands for it.
        keyed = {"type": "order.paid", "data": {"order": 3}}
        headers = {**key, "Idempotency-Key": "k-3"}
        one = await client.post(path, json=keyed, headers=headers)
        two = await client.post(path, json=keyed, headers=headers)
        assert one.json()["status"] == "accepted" and one.json()["id"] is None
        assert two.json() == {"event": one.json()["event"], "id": None, "status": "duplicate"}
        other = await client.post(path, json={**keyed, "data": {"order": 4}}, headers=headers)
        assert_problem(other, 409, "idempotency_conflict")
    stored = await rows(conn, "SELECT id, client_id FROM stream_events ORDER BY id")
    assert [r["id"] for r in stored] == [answer["event"], one.json()["event"]]
    usage = await rows(conn, "SELECT sum(events) AS n FROM usage_counters")
    assert usage[0]["n"] == 2


async def test_ingest__malformed_and_too_large_events_store_nothing(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn)
    async with api_client(services) as client:
        stream = await new_stream(client, acme)
        path = f"/v1/streams/{stream['id']}/events"
        key = ingest_headers(stream)
        no_type = await client.post(path, json={"data": {}}, headers=key)
        body = assert_problem(no_type, 422, "invalid_input")
        assert {e["field"] for e in body["errors"]} == {"type"}
        not_object = await client.post(path, json={"type": "t", "data": [1]}, headers=key)
        assert_problem(not_object, 422, "invalid_input")
        extra = await client.post(path, json={"type": "t", "data": {}, "x": 1}, headers=key)
        assert_problem(extra, 422, "invalid_input")
        nul = await client.post(path, json={"type": "t", "data": {"a": "\x00"}}, headers=key)
        assert_problem(nul, 422, "unstorable_value")
        broken = await client.post(path, content=b"{", headers=key)
        assert_problem(broken, 400, "malformed_body")
        big = {"type": "t", "data": {"text": "x" * (64 * 1024)}}
        assert_problem(await client.post(path, json=big, headers=key), 413, "payload_too_large")
        zone = await client.post(
            path, json={"type": "t", "occurred_at": "2026-01-01T00:00:00", "data": {}}, headers=key
        )
        assert_problem(zone, 422, "invalid_input")
    assert await rows(conn, "SELECT id FROM stream_events") == []


async def test_plan_limits__streams_and_events_per_month(services: Services, conn: Conn) -> None:
    acme = await make_tenant(conn)  # free: 1 stream, 1,000 events a month
    async with api_client(services) as client:
        stream = await new_stream(client, acme)
        second = await client.post("/v1/streams", json={"name": "More"}, headers=acme.headers)
        assert_problem(second, 402, "plan_limit")
        path = f"/v1/streams/{stream['id']}"
        key = ingest_headers(stream)
        for batch in range(2):
            events = [{"id": f"{batch}-{n}", "type": "t", "data": {"n": n}} for n in range(500)]
            answer = await client.post(f"{path}/batch", json={"events": events}, headers=key)
            assert answer.status_code == 200, answer.text
        over = await client.post(f"{path}/events", json={"type": "t", "data": {}}, headers=key)
        assert_problem(over, 402, "plan_limit")
        usage = (await client.get("/v1/usage", headers=acme.headers)).json()
    assert (usage["streams"], usage["events"], usage["submissions"]) == (1, 1000, 0)
    assert (usage["limits"]["streams"], usage["limits"]["monthly_events"]) == (1, 1000)
    assert (await rows(conn, "SELECT count(*) AS n FROM stream_events"))[0]["n"] == 1000
    # Submissions are counted apart: none were.
    counted = await rows(conn, "SELECT sum(submissions) AS s, sum(events) AS e FROM usage_counters")
    assert (counted[0]["s"], counted[0]["e"]) == (0, 1000)


async def test_ingest__20_way_races_on_one_id(db_url: str, tmp_path: Path, conn: Conn) -> None:
    acme = await make_tenant(conn)
    async with built_services(db_url, tmp_path, pool_max=20) as services:
        async with api_client(services) as client:
            stream = await new_stream(client, acme)
            path = f"/v1/streams/{stream['id']}/events"
            key = ingest_headers(stream)
            same = await asyncio.gather(
                *(client.post(path, json=EVENT, headers=key) for _ in range(20))
            )
            changed = await asyncio.gather(
                *(
                    client.post(
                        path, json={"id": "race-2", "type": "t", "data": {"n": n}}, headers=key
                    )
                    for n in range(20)
                )
            )
    statuses = sorted(r.json()["status"] for r in same)
    assert statuses == ["accepted"] + ["duplicate"] * 19
    assert len({r.json()["event"] for r in same}) == 1
    codes = sorted(r.status_code for r in changed)
    assert codes == [202] + [409] * 19
    for response in changed:
        if response.status_code == 409:
            assert_problem(response, 409, "idempotency_conflict")
    stored = await rows(conn, "SELECT client_id, count(*) AS n FROM stream_events GROUP BY 1")
    assert sorted((r["client_id"], r["n"]) for r in stored) == [("order-1", 1), ("race-2", 1)]
    counted = await rows(conn, "SELECT sum(events) AS n FROM usage_counters")
    assert counted[0]["n"] == 2


async def test_ingest_key__bad_ones_are_throttled_like_api_keys(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn)
    proxied = with_settings(services, trusted_proxies=["127.0.0.1/32"])
    async with api_client(proxied) as client:
        stream = await new_stream(client, acme)
        path = f"/v1/streams/{stream['id']}/events"
        guess = {"Authorization": "Bearer pbs_guess", "X-Forwarded-For": "203.0.113.9"}
        first = [(await client.post(path, json=EVENT, headers=guess)).status_code for _ in "x" * 20]
        over = await client.post(path, json=EVENT, headers=guess)
        valid = await client.post(
            path, json=EVENT, headers={**ingest_headers(stream), "X-Forwarded-For": "203.0.113.9"}
        )
    assert first == [401] * 20
    assert_problem(over, 429, "too_many_attempts")
    assert valid.status_code == 202, valid.text
