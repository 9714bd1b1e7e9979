"""Every attempt goes to its destination as it is at the attempt: after its owner changes a
webhook's URL (or rotates its secret), no retry by hand, bulk replay or automatic retry sends
to the old URL or signs with the old secret; the body is still the accepted submission's."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from core.outbox.worker import Deliverer, WorkerOptions
from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from tests.support.api import api_client, create
from tests.support.builders import TELEGRAM_TOKEN, Tenant, make_tenant
from tests.support.peers import Peer, hex_signature_matches, receiver, status, telegram_api
from tests.support.settings import with_settings
from tests.support.submit import submit_client

FAST = WorkerOptions(timeout=1, margin=0.1)
SECRET = "first-signing-secret-0123456789"
ROTATED = "second-signing-secret-9876543210"
NEW_BOT = "222222:BBBBbbbbBBBBbbbbBBBBbbbbBBBBbbbbBBB"


async def _wired(services: Services, conn: Conn, url: str) -> tuple[Tenant, str, str]:
    """Through /v1: a form, a webhook destination at `url` with SECRET and a route to it."""
    acme = await make_tenant(conn, plan="pro")
    async with api_client(services) as client:
        form = await create(client, acme, "/v1/forms", {"name": "Contact"})
        dst = await create(
            client,
            acme,
            "/v1/destinations",
            {"type": "webhook", "name": "Hook", "config": {"url": url}, "secret": SECRET},
        )
        await create(client, acme, f"/v1/forms/{form['id']}/routes", {"destination_id": dst["id"]})
    return acme, form["id"], dst["id"]


async def _submit(services: Services, form: str, values: dict[str, Any]) -> str:
    async with submit_client(services) as client:
        posted = await client.post(
            f"/s/{form}", json=values, headers={"Accept": "application/json"}
        )
    assert posted.status_code == 201, posted.text
    receipt: str = posted.json()["receipt"]
    return receipt


async def _patch(services: Services, acme: Tenant, dst: str, change: dict[str, Any]) -> None:
    async with api_client(services, acme.key) as api:
        patched = await api.patch(f"/v1/destinations/{dst}", json=change)
    assert patched.status_code == 200, patched.text


async def _pass(services: Services, *, later: timedelta = timedelta()) -> None:
    await Deliverer(services, options=FAST).run_pass(now=utcnow() + later, budget=5)


def _counts(old: Peer, new: Peer) -> tuple[int, int]:
    return len(old.requests), len(new.requests)


async def test_retry_by_hand__after_a_url_change_goes_to_the_new_url_only(
    services: Services, conn: Conn
) -> None:
    with receiver(status(410)) as old, receiver() as new:
        acme, form, dst = await _wired(services, conn, old.url + "/old")
        receipt = await _submit(services, form, {"email": "a@example.com", "n": 1})
        await _pass(services)
        before = _counts(old, new)
        await _patch(services, acme, dst, {"config": {"url": new.url + "/new"}})
        async with api_client(services, acme.key) as api:
            [line] = (await api.get("/v1/deliveries", params={"status": "dead"})).json()["data"]
            retried = await api.post(f"/v1/deliveries/{line['id']}/retry")
            assert retried.status_code == 200, retried.text
            await _pass(services)
            after = (await api.get(f"/v1/deliveries/{line['id']}")).json()
            detail = (await api.get(f"/v1/submissions/{receipt}")).json()
    assert before == (1, 0)
    assert _counts(old, new) == (1, 1)
    assert after["status"] == "sent"
    [first], [second] = old.requests, new.requests
    assert second.path == "/new"
    # The same delivery, the same body: the receipt and values accepted with the submission.
    assert first.headers["X-Postbag-Delivery"] == second.headers["X-Postbag-Delivery"]
    assert second.body == first.body
    sent = json.loads(second.body)
    assert (sent["receipt"], sent["values"]) == (receipt, {"email": "a@example.com", "n": 1})
    # The delivery's record says where its last attempt went.
    assert [d["target"] for d in detail["deliveries"]] == [{"url": new.url + "/new"}]


async def test_bulk_replay__after_a_url_change_goes_to_the_new_url_only(
    services: Services, conn: Conn
) -> None:
    with receiver(status(410)) as old, receiver() as new:
        acme, form, dst = await _wired(services, conn, old.url + "/old")
        receipts = {await _submit(services, form, {"n": n}) for n in range(2)}
        since = (utcnow() - timedelta(hours=1)).isoformat()
        await _pass(services)
        before = _counts(old, new)
        await _patch(services, acme, dst, {"config": {"url": new.url + "/new"}})
        async with api_client(services, acme.key) as api:
            replay = await api.post(
                "/v1/deliveries/replay", json={"destination": dst, "since": since}
            )
        assert replay.status_code == 202, replay.text
        assert replay.json()["total"] == 2
        # The replay's rate (10 a second) spaces them 0.1 s apart.
        await _pass(services, later=timedelta(seconds=1))
    assert before == (2, 0)
    assert _counts(old, new) == (2, 2)
    assert {json.loads(r.body)["receipt"] for r in new.requests} == receipts
    assert sorted(r.body for r in new.requests) == sorted(r.body for r in old.requests)


async def test_automatic_retry__a_pending_delivery_goes_to_the_url_current_at_its_attempt(
    services: Services, conn: Conn
) -> None:
    with receiver(status(503)) as old, receiver() as new:
        acme, form, dst = await _wired(services, conn, old.url + "/old")
        receipt = await _submit(services, form, {"n": 1})
        await _pass(services)  # 503: failed, due again in about a minute
        before = _counts(old, new)
        await _patch(services, acme, dst, {"config": {"url": new.url + "/new"}})
        await _pass(services, later=timedelta(minutes=5))
        async with api_client(services, acme.key) as api:
            [line] = (await api.get("/v1/deliveries")).json()["data"]
    assert before == (1, 0)
    assert _counts(old, new) == (1, 1)
    assert (line["status"], line["attempts"]) == ("sent", 2)
    assert new.requests[0].body == old.requests[0].body
    assert json.loads(new.requests[0].body)["receipt"] == receipt


async def test_signing__a_delivery_queued_before_a_rotation_is_signed_with_the_current_secret(
    services: Services, conn: Conn
) -> None:
    with receiver() as peer:
        acme, form, dst = await _wired(services, conn, peer.url + "/hook")
        await _submit(services, form, {"n": 1})
        await _patch(services, acme, dst, {"secret": ROTATED})
        await _pass(services)
    [request] = peer.requests
    signature = request.headers["X-Postbag-Signature"]
    assert hex_signature_matches(ROTATED, request.body, signature)
    assert not hex_signature_matches(SECRET, request.body, signature)


async def test_retry_by_hand__a_telegram_delivery_goes_to_the_current_chat_with_the_current_bot(
    services: Services, conn: Conn
) -> None:
    with receiver(status(400)) as api:
        bot = with_settings(services, telegram_api_url=api.url + "/")
        acme = await make_tenant(conn, plan="pro")
        async with api_client(bot, acme.key) as client:
            form = await create(client, acme, "/v1/forms", {"name": "Contact"})
            dst = await create(
                client,
                acme,
                "/v1/destinations",
                {
                    "type": "telegram",
                    "name": "Chat",
                    "config": {"chat_id": "-100111"},
                    "secret": TELEGRAM_TOKEN,
                },
            )
            await create(
                client, acme, f"/v1/forms/{form['id']}/routes", {"destination_id": dst["id"]}
            )
            receipt = await _submit(bot, form["id"], {"n": 1})
            await _pass(bot)  # 400: dead at once
            api.respond = telegram_api()
            patched = await client.patch(
                f"/v1/destinations/{dst['id']}",
                json={"config": {"chat_id": "-100222"}, "secret": NEW_BOT},
            )
            assert patched.status_code == 200, patched.text
            [line] = (await client.get("/v1/deliveries")).json()["data"]
            assert (await client.post(f"/v1/deliveries/{line['id']}/retry")).status_code == 200
            await _pass(bot)
    first, second = api.requests
    assert (first.path, json.loads(first.body)["chat_id"]) == (
        f"/bot{TELEGRAM_TOKEN}/sendMessage",
        "-100111",
    )
    assert (second.path, json.loads(second.body)["chat_id"]) == (
        f"/bot{NEW_BOT}/sendMessage",
        "-100222",
    )
    assert json.loads(second.body)["text"] == json.loads(first.body)["text"]
    assert receipt in json.loads(second.body)["text"]
