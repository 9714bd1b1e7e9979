"""The webhook type against a real loopback receiver, as a receiver written from the contract
verifies it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import httpx
from standardwebhooks import Webhook

from core.outbox.worker import Deliverer
from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from tests.support.api import api_client, create
from tests.support.builders import Tenant, make_tenant
from tests.support.peers import receiver
from tests.support.submit import submit_client

NODE = "/usr/bin/node"
SEED_RECEIVER = Path(__file__).with_name("seed_receiver.mjs")


def _seed_verifies(tmp_path: Path, secret: str, body: bytes, header: str) -> bool:
    """Run the seed's `verifyFormWebhook`, verbatim, in Node on the raw body received."""
    raw = tmp_path / "body.json"
    raw.write_bytes(body)
    done = subprocess.run(
        [NODE, str(SEED_RECEIVER), secret, str(raw), header],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    return {"true": True, "false": False}[done.stdout]


async def _form_routed_to_hook(
    api: httpx.AsyncClient, tenant: Tenant, peer_url: str, fields: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A form made with `fields` and a webhook destination to `peer_url`, routed, through
    the API; both as it answered."""
    form = await create(api, tenant, "/v1/forms", fields)
    hook = await create(
        api,
        tenant,
        "/v1/destinations",
        {"type": "webhook", "name": "Hook", "config": {"url": peer_url + "/hook"}},
    )
    await create(api, tenant, f"/v1/forms/{form['id']}/routes", {"destination_id": hook["id"]})
    return form, hook


async def test_webhook__seed_receiver_verifies_a_generated_secret_and_reads_the_visitor_order(
    services: Services, conn: Conn, tmp_path: Path
) -> None:
    acme = await make_tenant(conn, plan="self_hosted")
    labels = {"alpha": "Alpha", "ok": "I agree", "zeta": "Zeta", "mid": "Middle"}
    with receiver() as peer:
        async with api_client(services) as api:
            form, hook = await _form_routed_to_hook(
                api, acme, peer.url, {"name": "Contact", "labels": labels, "consent_field": "ok"}
            )
            read_back = (await api.get(f"/v1/forms/{form['id']}", headers=acme.headers)).json()
        async with submit_client(services) as client:
            posted = await client.post(
                f"/s/{form['id']}",
                content="zeta=Zoë&alpha=a&mid=m&ok=on&plain=p",
                headers={
                    "Content-Type": "application/x-www-form-urlencoded",
                    "Accept": "application/json",
                },
            )
        assert posted.status_code == 201, posted.text
        stats = await Deliverer(services).run_pass(now=utcnow(), budget=30)
    assert stats["sent"] == 1
    secret = hook["secret"]
    assert secret.startswith("whsec_")
    [request] = peer.requests
    header = request.headers["X-Postbag-Signature"]
    assert _seed_verifies(tmp_path, secret, request.body, header)
    assert not _seed_verifies(tmp_path, secret, request.body.replace(b"Zo", b"Jo"), header)
    # Standard Webhooks keeps its own key (the decoded whsec_ bytes).
    body = json.loads(request.body)
    assert Webhook(secret).verify(request.body, request.headers) == body
    assert list(read_back["labels"]) == ["alpha", "ok", "zeta", "mid"]
    assert list(body) == [
        "event",
        "receipt",
        "form",
        "submitted_at",
        "test",
        "values",
        "labels",
        "consent",
        "attachments",
        "meta",
    ]
    assert list(body["values"].items()) == [
        ("zeta", "Zoë"),
        ("alpha", "a"),
        ("mid", "m"),
        ("ok", "on"),
        ("plain", "p"),
    ]
    assert list(body["labels"].items()) == [
        ("zeta", "Zeta"),
        ("alpha", "Alpha"),
        ("mid", "Middle"),
        ("ok", "I agree"),
    ]
    assert body["consent"] is True


async def test_webhook__a_submitted_number_arrives_exactly_as_it_was_sent(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn, plan="self_hosted")
    with receiver() as peer:
        async with api_client(services) as api:
            form, _ = await _form_routed_to_hook(api, acme, peer.url, {"name": "Orders"})
        async with submit_client(services) as client:
            posted = await client.post(
                f"/s/{form['id']}",
                content=b'{"order": 123456789012345678901234567890, "total": 0.1, "count": -7}',
                headers={"Content-Type": "application/json", "Accept": "application/json"},
            )
        assert posted.status_code == 201, posted.text
        stats = await Deliverer(services).run_pass(now=utcnow(), budget=30)
    assert stats["sent"] == 1
    [request] = peer.requests
    assert b'"values":{"order":123456789012345678901234567890,"total":0.1,"count":-7}' in (
        request.body
    )
