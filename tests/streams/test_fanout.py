"""Fan-out through the outbox: one delivery per matching route in the ingest transaction,
referencing the event (no copy); bodies built at send time and signed both ways; erase
reaching every copy; retention."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import httpx
from standardwebhooks import Webhook

from core.outbox.worker import Deliverer, WorkerOptions
from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from core.ticks.retention import run_retention
from tests.streams.test_ingest import ingest_headers, new_stream
from tests.support.api import EMAIL, WEBHOOK, api_client, assert_problem
from tests.support.builders import Tenant, make_tenant
from tests.support.peers import hex_signature_matches, receiver, status
from tests.support.records import rows
from tests.support.settings import SENDER, with_settings

FAST = WorkerOptions(timeout=2, margin=0.1)


async def _hook(client: httpx.AsyncClient, who: Tenant, url: str) -> dict[str, Any]:
    response = await client.post(
        "/v1/destinations", json={**WEBHOOK, "config": {"url": url}}, headers=who.headers
    )
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


async def _route(
    client: httpx.AsyncClient, who: Tenant, stream: str, body: dict[str, Any]
) -> dict[str, Any]:
    response = await client.post(f"/v1/streams/{stream}/routes", json=body, headers=who.headers)
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


async def test_fanout__by_event_type_signed_both_ways(services: Services, conn: Conn) -> None:
    acme = await make_tenant(conn, plan="pro")
    with receiver() as orders_peer, receiver() as all_peer:
        async with api_client(services) as client:
            stream = await new_stream(client, acme)
            orders = await _hook(client, acme, orders_peer.url + "/orders")
            everything = await _hook(client, acme, all_peer.url + "/all")
            await _route(
                client,
                acme,
                stream["id"],
                {"destination_id": orders["id"], "event_types": ["order.paid"]},
            )
            await _route(client, acme, stream["id"], {"destination_id": everything["id"]})
            events = [
                {
                    "id": "o-1",
                    "type": "order.paid",
                    "occurred_at": "2026-12-01T10:00:00+01:00",
                    "data": {"order": 1, "items": ["a", "b"]},
                },
                {"id": "s-1", "type": "signup", "data": {"user": "u1"}},
            ]
            answer = await client.post(
                f"/v1/streams/{stream['id']}/batch",
                json={"events": events},
                headers=ingest_headers(stream),
            )
            results = answer.json()["results"]
            # The deliveries were planned in the ingest's transaction, holding no copy.
            planned = await rows(
                conn,
                "SELECT kind, event_id, payload, destination_id FROM deliveries ORDER BY id",
            )
            assert sorted((d["event_id"], d["destination_id"]) for d in planned) == sorted(
                [
                    (results[0]["event"], orders["id"]),
                    (results[0]["event"], everything["id"]),
                    (results[1]["event"], everything["id"]),
                ]
            )
            assert {d["kind"] for d in planned} == {"event"}
            assert all(d["payload"] is None for d in planned)
            stats = await Deliverer(services, options=FAST).run_pass(now=utcnow(), budget=10)
            detail = await client.get(
                f"/v1/streams/{stream['id']}/events/{results[0]['event']}", headers=acme.headers
            )
    assert stats["sent"] == 3
    [request] = orders_peer.requests
    assert len(all_peer.requests) == 2
    headers = {k.lower(): v for k, v in request.headers.items()}
    assert headers["x-postbag-event"] == "stream.event"
    body = json.loads(request.body)
    assert body == {
        "event": "stream.event",
        "receipt": results[0]["event"],
        "stream": stream["id"],
        "id": "o-1",
        "type": "order.paid",
        "occurred_at": "2026-12-01T09:00:00.000Z",
        "received_at": body["received_at"],
        "data": {"order": 1, "items": ["a", "b"]},
    }
    secret = orders["secret"]
    assert hex_signature_matches(secret, request.body, headers["x-postbag-signature"])
    assert Webhook(secret).verify(request.body, request.headers) == body
    types = sorted(json.loads(r.body)["type"] for r in all_peer.requests)
    assert types == ["order.paid", "signup"]
    lines = detail.json()["deliveries"]
    assert sorted(d["destination_id"] for d in lines) == sorted([orders["id"], everything["id"]])
    assert {d["status"] for d in lines} == {"sent"}


async def test_erase__reaches_every_copy(services: Services, conn: Conn) -> None:
    acme = await make_tenant(conn)
    answer = b'{"echo": "secret order 42"}'
    with receiver(status(500, body=answer)) as peer:
        async with api_client(services) as client:
            stream = await new_stream(client, acme, schema_mode="observe")
            hook = await _hook(client, acme, peer.url)
            await _route(client, acme, stream["id"], {"destination_id": hook["id"]})
            await client.post(
                f"/v1/streams/{stream['id']}/schemas",
                json={"schema": {"type": "object", "properties": {"n": {"type": "string"}}}},
                headers=acme.headers,
            )
            posted = await client.post(
                f"/v1/streams/{stream['id']}/events",
                json={"type": "t", "data": {"n": 42, "note": "secret order 42"}},
                headers=ingest_headers(stream),
            )
            event = posted.json()["event"]
            await Deliverer(services, options=FAST).run_pass(now=utcnow(), budget=10)
            assert len(peer.requests) == 1
            excerpts = await rows(conn, "SELECT response_excerpt FROM delivery_attempts")
            assert "secret order 42" in excerpts[0]["response_excerpt"]
            erased = await client.post(
                f"/v1/streams/{stream['id']}/events/{event}/erase", headers=acme.headers
            )
            assert erased.status_code == 204
            # Due again: nothing more is sent, the delivery ends skipped.
            await conn.execute("UPDATE deliveries SET next_attempt_at = now()")
            await Deliverer(services, options=FAST).run_pass(
                now=utcnow() + timedelta(hours=1), budget=10
            )
            shown = await client.get(
                f"/v1/streams/{stream['id']}/events/{event}", headers=acme.headers
            )
    assert len(peer.requests) == 1
    assert shown.json()["data"] is None and shown.json()["errors"] is None
    assert shown.json()["erased_at"] is not None
    [delivery] = shown.json()["deliveries"]
    assert (delivery["status"], delivery["reason"]) == ("skipped", "values_erased")
    dump = json.dumps(
        [
            await rows(conn, "SELECT * FROM stream_events"),
            await rows(conn, "SELECT * FROM deliveries"),
            await rows(conn, "SELECT * FROM delivery_attempts"),
            await rows(conn, "SELECT * FROM events"),
        ],
        default=str,
    )
    assert "secret order 42" not in dump


async def test_retention__expired_events_lose_their_data(services: Services, conn: Conn) -> None:
    acme = await make_tenant(conn)
    async with api_client(services) as client:
        stream = await new_stream(client, acme, retention_days=1)
        posted = await client.post(
            f"/v1/streams/{stream['id']}/events",
            json={"type": "t", "data": {"n": 1}},
            headers=ingest_headers(stream),
        )
    [row] = await rows(conn, "SELECT received_at, erase_at FROM stream_events")
    assert row["erase_at"] - row["received_at"] == timedelta(days=1)
    early = await run_retention(services, now=utcnow(), budget=5)
    assert early.get("events_expired", 0) == 0
    stats = await run_retention(services, now=utcnow() + timedelta(days=1, minutes=1), budget=5)
    assert stats["events_expired"] == 1
    [event] = await rows(conn, "SELECT id, data, erase_reason FROM stream_events")
    assert (event["id"], event["data"], event["erase_reason"]) == (
        posted.json()["event"],
        None,
        "expired",
    )


async def test_fanout__dead_then_retried_by_hand(services: Services, conn: Conn) -> None:
    acme = await make_tenant(conn)
    answers = [404]
    with receiver(lambda _r: (answers[-1], {}, b"")) as peer:
        async with api_client(services) as client:
            stream = await new_stream(client, acme)
            hook = await _hook(client, acme, peer.url)
            await _route(client, acme, stream["id"], {"destination_id": hook["id"]})
            posted = await client.post(
                f"/v1/streams/{stream['id']}/events",
                json={"id": "e-1", "type": "t", "data": {"n": 1}},
                headers=ingest_headers(stream),
            )
            event = posted.json()["event"]
            await Deliverer(services, options=FAST).run_pass(now=utcnow(), budget=10)
            [dead] = (await client.get("/v1/deliveries", headers=acme.headers)).json()["data"]
            assert (dead["kind"], dead["status"], dead["submission"]) == ("event", "dead", None)
            answers.append(200)
            retried = await client.post(f"/v1/deliveries/{dead['id']}/retry", headers=acme.headers)
            assert retried.status_code == 200, retried.text
            await Deliverer(services, options=FAST).run_pass(now=utcnow(), budget=10)
            shown = await client.get(
                f"/v1/streams/{stream['id']}/events/{event}", headers=acme.headers
            )
            assert [d["status"] for d in shown.json()["deliveries"]] == ["sent"]
            erased = await client.post(
                f"/v1/streams/{stream['id']}/events/{event}/erase", headers=acme.headers
            )
            assert erased.status_code == 204
            again = await client.post(f"/v1/deliveries/{dead['id']}/retry", headers=acme.headers)
    assert_problem(again, 409, "values_erased")
    assert [json.loads(r.body)["id"] for r in peer.requests] == ["e-1", "e-1"]


async def test_fanout__an_email_reads_the_event(services: Services, conn: Conn, ses: Any) -> None:
    acme = await make_tenant(conn)
    async with api_client(services) as client:
        stream = await new_stream(client, acme)
        inbox = await client.post("/v1/destinations", json=EMAIL, headers=acme.headers)
        await _route(client, acme, stream["id"], {"destination_id": inbox.json()["id"]})
        posted = await client.post(
            f"/v1/streams/{stream['id']}/events",
            json={"type": "order.paid", "data": {"order": 1042, "paid": True}},
            headers=ingest_headers(stream),
        )
    mail = with_settings(services, email_provider="ses", mail_from=SENDER)
    stats = await Deliverer(mail, options=FAST).run_pass(now=utcnow(), budget=10)
    assert stats["sent"] == 1
    [sent] = ses.sent_messages
    assert sent.subject == "New event: order.paid"
    lines = sent.body.splitlines()
    assert sorted(lines[:2]) == ["order: 1042", "paid: Yes"]
    assert lines[2].startswith(f"Receipt {posted.json()['event']} · order.paid on stream ")


async def test_fanout__deleting_a_destination_removes_its_stream_routes(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn, plan="pro")
    async with api_client(services) as client:
        stream = await new_stream(client, acme)
        routes = f"/v1/streams/{stream['id']}/routes"
        gone = await _hook(client, acme, "https://example.com/gone")
        await _route(client, acme, stream["id"], {"destination_id": gone["id"]})
        deleted = await client.delete(f"/v1/destinations/{gone['id']}", headers=acme.headers)
        assert deleted.status_code == 204
        # No route left `enabled` to a destination that is gone, silently planning nothing.
        assert (await client.get(routes, headers=acme.headers)).json()["data"] == []
        kept = await _hook(client, acme, "https://example.com/kept")
        await _route(client, acme, stream["id"], {"destination_id": kept["id"]})
        answer = await client.post(
            f"/v1/streams/{stream['id']}/events",
            json={"id": "after", "type": "signup", "data": {}},
            headers=ingest_headers(stream),
        )
        assert answer.status_code == 202, answer.text
        listed = (await client.get(routes, headers=acme.headers)).json()["data"]
    assert [r["destination_id"] for r in listed] == [kept["id"]]
    planned = await rows(conn, "SELECT destination_id FROM deliveries")
    assert [d["destination_id"] for d in planned] == [kept["id"]]
