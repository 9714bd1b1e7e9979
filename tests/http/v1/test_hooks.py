"""REST hooks through `/v1` and the submit app, delivered by a real worker pass to loopback
targets: subscribe, signed deliveries, samples equal to what is delivered, `410 Gone`
unsubscribing, the lifecycle events, refusals."""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import timedelta
from typing import Any

import httpx
from standardwebhooks import Webhook

from core.outbox.worker import Deliverer
from core.owner.organizations import create_api_key
from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from core.ticks.retention import run_retention
from tests.streams.test_ingest import ingest_headers, new_stream
from tests.support.api import api_client, assert_problem, create, error_fields
from tests.support.builders import (
    Tenant,
    add_attempt,
    make_deliveries,
    make_form,
    make_route_to,
    make_tenant,
)
from tests.support.peers import receiver, status
from tests.support.records import rows
from tests.support.submit import submit_client


async def _post(services: Services, form: str, values: dict[str, Any]) -> str:
    async with submit_client(services) as client:
        answer = await client.post(f"/s/{form}", json=values)
    assert answer.status_code == 201, answer.text
    receipt: str = answer.json()["receipt"]
    return receipt


async def _pass(services: Services) -> dict[str, int]:
    stats: dict[str, int] = await Deliverer(services).run_pass(now=utcnow(), budget=30)
    return stats


async def _subscribe(
    api: httpx.AsyncClient, who: Tenant, url: str, event: str, **source: str
) -> dict[str, Any]:
    return await create(api, who, "/v1/hooks", {"target_url": url, "event": event, **source})


def _verify_both(secret: str, body: bytes, headers: dict[str, str]) -> None:
    Webhook(secret).verify(body, headers)  # raises when the Standard Webhooks trio is wrong
    expected = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    assert headers["X-Postbag-Signature"] == f"sha256={expected}"


async def test_hooks__a_subscribed_form_delivers_signed_bodies_equal_to_its_sample(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn, plan="self_hosted")
    labels = {"email": "Email", "message": "Message"}
    with receiver() as peer:
        async with api_client(services) as api:
            form = await create(api, acme, "/v1/forms", {"name": "Contact", "labels": labels})
            placeholder = (
                await api.get(f"/v1/forms/{form['id']}/sample", headers=acme.headers)
            ).json()
            hook = await _subscribe(
                api, acme, peer.url + "/zap", "submission.created", form=form["id"]
            )
            listed = (await api.get("/v1/hooks", headers=acme.headers)).json()["data"]
            read = (await api.get(f"/v1/hooks/{hook['id']}", headers=acme.headers)).json()
            receipts = [
                await _post(services, form["id"], {"message": f"hi {n}", "email": "a@example.com"})
                for n in range(2)
            ]
            assert (await _pass(services))["sent"] == 2
            sample = (
                await api.get(f"/v1/forms/{form['id']}/sample?limit=5", headers=acme.headers)
            ).json()
    assert placeholder["placeholder"] is True
    [made_up] = placeholder["data"]
    assert (made_up["receipt"], made_up["test"]) == ("sub_sample", True)
    assert list(made_up["values"]) == ["email", "message"]
    assert hook["secret"].startswith("whsec_")
    assert (hook["event"], hook["form"], hook["target_url"]) == (
        "submission.created",
        form["id"],
        peer.url + "/zap",
    )
    assert [h["id"] for h in listed] == [hook["id"]]
    assert "secret" not in read and read["destination"] == hook["destination"]
    delivered = sorted(peer.requests, key=lambda r: json.loads(r.body)["receipt"], reverse=True)
    for request in delivered:
        _verify_both(hook["secret"], request.body, request.headers)
    # The sample is the delivered body: the same JSON, key for key, in the same order.
    assert sample["placeholder"] is False
    assert [s["receipt"] for s in sample["data"]] == receipts[::-1]
    for body, request in zip(sample["data"], delivered, strict=True):
        sent = json.loads(request.body)
        assert body == sent
        assert list(body) == list(sent) and list(body["values"]) == list(sent["values"])
    audit = await rows(conn, "SELECT action, subject FROM audit_log ORDER BY seq")
    assert {"action": "hook.created", "subject": hook["id"]} in audit
    assert {"action": "form.sampled", "subject": form["id"]} in audit


async def test_hooks__a_410_from_the_target_unsubscribes_with_an_event_and_an_audit_row(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn, plan="self_hosted")
    with receiver(status(410)) as peer:
        async with api_client(services) as api:
            form = await create(api, acme, "/v1/forms", {"name": "Contact"})
            hook = await _subscribe(api, acme, peer.url, "submission.created", form=form["id"])
            await _post(services, form["id"], {"message": "hi"})
            stats = await _pass(services)
            gone = await api.get(f"/v1/hooks/{hook['id']}", headers=acme.headers)
            listed = (await api.get("/v1/hooks", headers=acme.headers)).json()["data"]
            destination = await api.get(
                f"/v1/destinations/{hook['destination']}", headers=acme.headers
            )
            events = (await api.get("/v1/events", headers=acme.headers)).json()["data"]
            await _post(services, form["id"], {"message": "after"})
    assert stats["dead"] == 1 and len(peer.requests) == 1
    assert_problem(gone, 404, "not_found")
    assert listed == []
    assert_problem(destination, 404, "not_found")
    [unsubscribed] = [e for e in events if e["type"] == "hook.unsubscribed"]
    assert unsubscribed["data"]["hook"] == hook["id"]
    assert unsubscribed["data"]["reason"] == "gone"
    [row] = await rows(
        conn,
        "SELECT actor_kind, via, subject FROM audit_log WHERE action = 'hook.unsubscribed'",
    )
    assert row == {"actor_kind": "system", "via": "worker", "subject": hook["id"]}
    [ended] = await rows(conn, "SELECT deleted_reason FROM hooks")
    assert ended["deleted_reason"] == "gone"
    # Nothing more is queued to it.
    assert len(await rows(conn, "SELECT id FROM deliveries")) == 1


async def test_hooks__a_stream_hook_delivers_each_event_as_its_sample_shows_it(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn, plan="self_hosted")
    with receiver() as peer:
        async with api_client(services) as api:
            stream = await new_stream(api, acme)
            empty = (
                await api.get(f"/v1/streams/{stream['id']}/sample", headers=acme.headers)
            ).json()
            hook = await _subscribe(api, acme, peer.url, "stream.event", stream=stream["id"])
            event = {"id": "order-1", "type": "order.paid", "data": {"order": 1, "total": 9.5}}
            posted = await api.post(
                f"/v1/streams/{stream['id']}/events", json=event, headers=ingest_headers(stream)
            )
            assert posted.status_code in (201, 202), posted.text
            assert (await _pass(services))["sent"] == 1
            sample = (
                await api.get(f"/v1/streams/{stream['id']}/sample", headers=acme.headers)
            ).json()
    assert empty["placeholder"] is True and empty["data"][0]["event"] == "stream.event"
    [request] = peer.requests
    _verify_both(hook["secret"], request.body, request.headers)
    assert request.headers["X-Postbag-Event"] == "stream.event"
    assert sample == {"data": [json.loads(request.body)], "placeholder": False}


async def test_hooks__a_delivery_dead_hook_hears_of_another_destinations_dead_delivery(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn, plan="self_hosted")
    with receiver(status(400)) as broken, receiver() as watcher:
        async with api_client(services) as api:
            form = await create(api, acme, "/v1/forms", {"name": "Contact"})
            plain = await create(
                api,
                acme,
                "/v1/destinations",
                {"type": "webhook", "name": "Broken", "config": {"url": broken.url}},
            )
            await create(
                api, acme, f"/v1/forms/{form['id']}/routes", {"destination_id": plain["id"]}
            )
            hook = await _subscribe(api, acme, watcher.url, "delivery.dead")
            receipt = await _post(services, form["id"], {"message": "hi"})
            # The pass that ends the delivery dead sends the hook's delivery too.
            stats = await _pass(services)
    assert (stats["dead"], stats["sent"]) == (1, 1)
    [request] = watcher.requests
    _verify_both(hook["secret"], request.body, request.headers)
    body = json.loads(request.body)
    assert request.headers["X-Postbag-Event"] == "delivery.dead"
    assert body["event"] == "delivery.dead"
    assert (body["submission"], body["destination"], body["reason"]) == (
        receipt,
        plain["id"],
        "http_400",
    )


async def test_hooks__a_destination_paused_hook_hears_when_a_destination_pauses_itself(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn, plan="self_hosted")
    form = await make_form(conn, acme)
    dst, rte = await make_route_to(conn, acme, form)
    now = utcnow()
    # Failing for more than its window (24 h), every attempt in it failed (10 of them).
    await make_deliveries(
        conn,
        acme,
        form,
        dst,
        rte,
        count=10,
        url="https://example.com/",
        due=now + timedelta(days=1),
    )
    for n in range(1, 11):
        await add_attempt(
            conn,
            acme,
            f"dlv_{rte}_{n}",
            attempt=1,
            at=now - timedelta(hours=2),
            duration_ms=5,
            outcome="failed",
        )
    await conn.execute(
        "UPDATE destinations SET health = 'failing', failing_since = %(since)s WHERE id = %(id)s",
        {"since": now - timedelta(hours=25), "id": dst},
    )
    with receiver() as watcher:
        async with api_client(services) as api:
            hook = await _subscribe(api, acme, watcher.url, "destination.paused")
        assert (await run_retention(services, now=now, budget=10))["destinations_paused"] == 1
        assert (await _pass(services))["sent"] == 1
    [request] = watcher.requests
    _verify_both(hook["secret"], request.body, request.headers)
    body = json.loads(request.body)
    assert request.headers["X-Postbag-Event"] == "destination.paused"
    assert (body["event"], body["destination"], body["reason"]) == (
        "destination.paused",
        dst,
        "failing",
    )


async def test_hooks__unsubscribing_removes_the_destination_and_its_route(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn, plan="self_hosted")
    async with api_client(services) as api:
        form = await create(api, acme, "/v1/forms", {"name": "Contact"})
        hook = await _subscribe(
            api, acme, "https://example.com/hook", "submission.created", form=form["id"]
        )
        deleted = await api.delete(f"/v1/hooks/{hook['id']}", headers=acme.headers)
        again = await api.delete(f"/v1/hooks/{hook['id']}", headers=acme.headers)
        routes = (await api.get(f"/v1/forms/{form['id']}/routes", headers=acme.headers)).json()
    assert deleted.status_code == 204
    assert_problem(again, 404, "not_found")
    assert routes["data"] == []
    [ended] = await rows(conn, "SELECT deleted_reason FROM hooks")
    assert ended["deleted_reason"] == "unsubscribed"
    audit = await rows(conn, "SELECT action FROM audit_log WHERE subject = %(s)s", s=hook["id"])
    assert [a["action"] for a in audit] == ["hook.created", "hook.deleted"]


async def test_hooks__bad_subscriptions_are_refused_and_store_nothing(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn, plan="free")
    async with api_client(services) as api:
        form = await create(api, acme, "/v1/forms", {"name": "Contact"})
        url = "https://example.com/hook"
        no_form = await api.post(
            "/v1/hooks",
            json={"target_url": url, "event": "submission.created"},
            headers=acme.headers,
        )
        extra = await api.post(
            "/v1/hooks",
            json={"target_url": url, "event": "delivery.dead", "form": form["id"]},
            headers=acme.headers,
        )
        bad_url = await api.post(
            "/v1/hooks",
            json={"target_url": "ftp://example.com/", "event": "delivery.dead"},
            headers=acme.headers,
        )
        # The plan counts hooks as destinations (free: 3).
        allowed = [
            await api.post(
                "/v1/hooks",
                json={"target_url": url, "event": "delivery.dead"},
                headers=acme.headers,
            )
            for _ in range(3)
        ]
        over = await api.post(
            "/v1/hooks", json={"target_url": url, "event": "delivery.dead"}, headers=acme.headers
        )
    assert error_fields(assert_problem(no_form, 422, "invalid_input")) == {"form"}
    assert error_fields(assert_problem(extra, 422, "invalid_input")) == {"form"}
    assert error_fields(assert_problem(bad_url, 422, "invalid_input")) == {"target_url"}
    assert [answer.status_code for answer in allowed] == [201] * 3
    assert_problem(over, 402, "plan_limit")
    assert len(await rows(conn, "SELECT id FROM hooks")) == 3
    assert len(await rows(conn, "SELECT id FROM destinations")) == 3


async def test_hooks__roles_below_admin_and_other_organizations_are_refused(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn, plan="self_hosted")
    other = await make_tenant(conn, "Other", plan="self_hosted")
    viewer = (await create_api_key(conn, acme.scope, name="v", role="viewer")).secret
    operator = (await create_api_key(conn, acme.scope, name="o", role="operator")).secret
    as_viewer = {"Authorization": f"Bearer {viewer}"}
    as_operator = {"Authorization": f"Bearer {operator}"}
    async with api_client(services) as api:
        form = await create(api, acme, "/v1/forms", {"name": "Contact"})
        hook = await _subscribe(
            api, acme, "https://example.com/hook", "submission.created", form=form["id"]
        )
        subscribe = {"target_url": "https://example.com/h", "event": "delivery.dead"}
        refused = [
            await api.post("/v1/hooks", json=subscribe, headers=as_operator),
            await api.get("/v1/hooks", headers=as_operator),
            await api.delete(f"/v1/hooks/{hook['id']}", headers=as_operator),
            await api.get(f"/v1/forms/{form['id']}/sample", headers=as_viewer),
        ]
        sampled = await api.get(f"/v1/forms/{form['id']}/sample", headers=as_operator)
        foreign = [
            await api.get(f"/v1/hooks/{hook['id']}", headers=other.headers),
            await api.delete(f"/v1/hooks/{hook['id']}", headers=other.headers),
            await api.get(f"/v1/forms/{form['id']}/sample", headers=other.headers),
            await api.post(
                "/v1/hooks",
                json={**subscribe, "event": "submission.created", "form": form["id"]},
                headers=other.headers,
            ),
        ]
        theirs = (await api.get("/v1/hooks", headers=other.headers)).json()["data"]
        still = await api.get(f"/v1/hooks/{hook['id']}", headers=acme.headers)
    for answer in refused:
        assert_problem(answer, 403, "forbidden")
    assert sampled.status_code == 200
    for answer in foreign:
        assert_problem(answer, 404, "not_found")
    assert theirs == []
    assert still.status_code == 200
    # The other organization's refused subscription left nothing (no destination either).
    assert len(await rows(conn, "SELECT id FROM destinations")) == 1
