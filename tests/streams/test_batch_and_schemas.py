"""Batch ingest (per-index results in one transaction) and stream schemas (append-only in
the database, one per event type, `enforce` and `observe`)."""

from __future__ import annotations

import psycopg
import pytest

from core.platform.db import Conn
from core.platform.services import Services
from tests.streams.test_ingest import ingest_headers, new_stream
from tests.support.api import api_client, assert_problem
from tests.support.builders import make_tenant
from tests.support.records import rows

ORDER_SCHEMA = {
    "type": "object",
    "required": ["order"],
    "properties": {"order": {"type": "integer"}},
}
# What the schema's violation says: where, which keyword, the field and the limit in words.
ORDER_NOT_AN_INTEGER = [
    {"path": "/order", "keyword": "type", "field": "order", "message": "`order` is not an integer"}
]


async def test_batch__mixed_results_in_one_transaction(services: Services, conn: Conn) -> None:
    acme = await make_tenant(conn)
    async with api_client(services) as client:
        stream = await new_stream(client, acme, schema_mode="enforce")
        path = f"/v1/streams/{stream['id']}"
        added = await client.post(
            f"{path}/schemas",
            json={"event_type": "order.paid", "schema": ORDER_SCHEMA},
            headers=acme.headers,
        )
        assert added.status_code == 201, added.text
        key = ingest_headers(stream)
        before = await client.post(
            f"{path}/events",
            json={"id": "a", "type": "order.paid", "data": {"order": 1}},
            headers=key,
        )
        assert before.json()["status"] == "accepted"
        events = [
            {"id": "a", "type": "order.paid", "data": {"order": 1}},  # stored before
            {"id": "b", "type": "order.paid", "data": {"order": 2}},
            {"id": "c", "type": "order.paid", "data": {"order": "three"}},  # breaks the schema
            {"id": "d", "type": "order.paid"},  # no data: malformed
            {"id": "b", "type": "order.paid", "data": {"order": 2}},  # again in this batch
            {"id": "e", "type": "note", "data": {"text": "\x00"}},  # cannot be stored
            {"id": "a", "type": "order.paid", "data": {"order": 9}},  # a's id, another payload
            {"type": "signup", "data": {"user": "u1"}},  # no id, no schema for its type
            "not an event",
        ]
        answer = await client.post(f"{path}/batch", json={"events": events}, headers=key)
    assert answer.status_code == 200, answer.text
    results = answer.json()["results"]
    assert [r["index"] for r in results] == list(range(len(events)))
    assert [r["status"] for r in results] == [
        "duplicate",
        "accepted",
        "quarantined",
        "rejected",
        "duplicate",
        "rejected",
        "rejected",
        "accepted",
        "rejected",
    ]
    assert results[0]["event"] == before.json()["event"]
    assert results[4]["event"] == results[1]["event"]
    assert results[2]["errors"] == ORDER_NOT_AN_INTEGER
    assert results[3]["event"] is None and results[3]["errors"][0]["field"] == "data"
    assert results[5]["errors"][0]["field"] == "data.text"
    assert results[6]["errors"][0]["field"] == "id"
    assert [r["id"] for r in results][:3] == ["a", "b", "c"]
    stored = await rows(
        conn, "SELECT client_id, status, reason FROM stream_events ORDER BY client_id"
    )
    assert [(r["client_id"], r["status"], r["reason"]) for r in stored] == [
        ("a", "accepted", None),
        ("b", "accepted", None),
        ("c", "quarantined", "schema_violation"),
        (None, "accepted", None),
    ]


async def test_batch__unstorable_values_reject_their_event_only(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn)
    async with api_client(services) as client:
        stream = await new_stream(client, acme)
        body = (
            b'{"events": [{"type": "t", "data": {"a": "\\ud800"}},'
            b' {"type": "t", "data": {"n": 1e400}},'
            b' {"type": "t", "data": {"n": NaN}},'
            b' {"type": "t", "data": {"ok": true}}]}'
        )
        answer = await client.post(
            f"/v1/streams/{stream['id']}/batch",
            content=body,
            headers={**ingest_headers(stream), "Content-Type": "application/json"},
        )
    assert answer.status_code == 200, answer.text
    results = answer.json()["results"]
    assert [r["status"] for r in results] == ["rejected", "rejected", "rejected", "accepted"]
    assert [r["errors"][0]["field"] for r in results[:3]] == ["data.a", "data.n", "data.n"]
    stored = await rows(conn, "SELECT data FROM stream_events")
    assert [r["data"] for r in stored] == [{"ok": True}]


async def test_batch__limits(services: Services, conn: Conn) -> None:
    acme = await make_tenant(conn)
    async with api_client(services) as client:
        stream = await new_stream(client, acme)
        path = f"/v1/streams/{stream['id']}/batch"
        key = ingest_headers(stream)
        many = {"events": [{"type": "t", "data": {}}] * 501}
        assert_problem(await client.post(path, json=many, headers=key), 422, "invalid_input")
        empty = {"events": []}
        assert_problem(await client.post(path, json=empty, headers=key), 422, "invalid_input")
        not_batch = {"event": []}
        assert_problem(await client.post(path, json=not_batch, headers=key), 422, "invalid_input")
        huge = {"events": [{"type": "t", "data": {"x": "y" * 60_000}}] * 20}
        assert_problem(await client.post(path, json=huge, headers=key), 413, "payload_too_large")
        over = {"events": [{"type": "t", "data": {"x": "y" * (64 * 1024)}}]}
        result = (await client.post(path, json=over, headers=key)).json()["results"][0]
        assert result["status"] == "rejected"
    assert await rows(conn, "SELECT id FROM stream_events") == []


async def test_schemas__append_only_in_the_database(services: Services, conn: Conn) -> None:
    acme = await make_tenant(conn)
    async with api_client(services) as client:
        stream = await new_stream(client, acme)
        path = f"/v1/streams/{stream['id']}/schemas"
        one = await client.post(path, json={"schema": ORDER_SCHEMA}, headers=acme.headers)
        two = await client.post(
            path, json={"event_type": "t", "schema": {"type": "object"}}, headers=acme.headers
        )
        assert (one.json()["version"], two.json()["version"]) == (1, 2)
        assert (one.json()["event_type"], two.json()["event_type"]) == (None, "t")
        listed = (await client.get(path, headers=acme.headers)).json()["data"]
        assert [s["version"] for s in listed] == [1, 2]
        bad = await client.post(path, json={"schema": {"type": 5}}, headers=acme.headers)
        assert_problem(bad, 422, "invalid_schema")
    with pytest.raises(psycopg.errors.RaiseException, match="immutable"):
        await conn.execute("UPDATE stream_schemas SET schema = '{}' WHERE version = 1")
    with pytest.raises(psycopg.errors.UniqueViolation):
        await conn.execute(
            "INSERT INTO stream_schemas (organization_id, stream_id, version, schema) "
            "VALUES (%(org)s, %(stream)s, 2, '{}')",
            {"org": acme.org, "stream": stream["id"]},
        )


async def test_schemas__observe_accepts_and_reports_drift(services: Services, conn: Conn) -> None:
    acme = await make_tenant(conn)
    async with api_client(services) as client:
        stream = await new_stream(client, acme, schema_mode="observe")
        path = f"/v1/streams/{stream['id']}"
        await client.post(f"{path}/schemas", json={"schema": ORDER_SCHEMA}, headers=acme.headers)
        key = ingest_headers(stream)
        drifted = await client.post(
            f"{path}/events", json={"type": "any", "data": {"order": "x"}}, headers=key
        )
        assert drifted.status_code == 202
        assert drifted.json()["status"] == "accepted"
        assert drifted.json()["errors"] == ORDER_NOT_AN_INTEGER
        listed = await client.get(f"{path}/events?status=accepted", headers=acme.headers)
    [event] = listed.json()["data"]
    assert event["errors"] == ORDER_NOT_AN_INTEGER
    assert event["schema_version"] == 1


async def test_schemas__suggested_from_events_then_adopted(services: Services, conn: Conn) -> None:
    acme = await make_tenant(conn)
    async with api_client(services) as client:
        stream = await new_stream(client, acme, schema_mode="enforce")
        path = f"/v1/streams/{stream['id']}"
        key = ingest_headers(stream)
        none_yet = await client.post(f"{path}/schemas/suggest", json={}, headers=acme.headers)
        assert_problem(none_yet, 422, "invalid_input")
        events = [{"type": "signup", "data": {"user": f"u{n}", "age": n}} for n in range(5)]
        events.append({"type": "other", "data": {"anything": True}})
        await client.post(f"{path}/batch", json={"events": events}, headers=key)
        suggested = await client.post(
            f"{path}/schemas/suggest", json={"event_type": "signup"}, headers=acme.headers
        )
        assert suggested.status_code == 201, suggested.text
        body = suggested.json()
        assert (body["version"], body["source"], body["event_type"]) == (1, "suggested", "signup")
        assert set(body["schema"]["properties"]) == {"user", "age"}
        # A suggestion is not enforced: a breaking event is still accepted.
        before = await client.post(
            f"{path}/events", json={"type": "signup", "data": {"age": "old"}}, headers=key
        )
        assert before.json()["status"] == "accepted"
        adopted = await client.post(f"{path}/schemas/1/adopt", headers=acme.headers)
        assert adopted.status_code == 201
        assert (adopted.json()["version"], adopted.json()["source"]) == (2, "manual")
        after = await client.post(
            f"{path}/events", json={"type": "signup", "data": {"age": "old"}}, headers=key
        )
        other_type = await client.post(
            f"{path}/events", json={"type": "other", "data": {"age": "old"}}, headers=key
        )
        missing = await client.post(f"{path}/schemas/9/adopt", headers=acme.headers)
    assert after.json()["status"] == "quarantined"
    assert {
        "path": "/age",
        "keyword": "type",
        "field": "age",
        "message": "`age` is not an integer",
    } in after.json()["errors"]
    assert other_type.json()["status"] == "accepted"
    assert_problem(missing, 404, "not_found")
