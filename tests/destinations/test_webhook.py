"""The webhook type against a real loopback receiver, as a receiver written from the contract
verifies it."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

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
STANDARD_RECEIVER = Path(__file__).with_name("standard_receiver.cjs")
# Where ./local/test installs the `standardwebhooks` npm package.
NODE_MODULES = Path(__file__).parents[2] / ".venv" / "node" / "node_modules"


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


def _node_library_verifies(
    tmp_path: Path, secret: str, body: bytes, headers: Mapping[str, str]
) -> bool:
    """Verify with the real `standardwebhooks` npm package, called as docs/webhooks.md says."""
    if not (NODE_MODULES / "standardwebhooks").is_dir():
        pytest.skip(
            "NODE CHECK SKIPPED: the standardwebhooks npm package is missing "
            f"(./local/test installs it into {NODE_MODULES.parent})"
        )
    raw = tmp_path / "standard.json"
    raw.write_bytes(body)
    done = subprocess.run(
        [NODE, str(STANDARD_RECEIVER), secret, str(raw), json.dumps(dict(headers))],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
        env={**os.environ, "NODE_PATH": str(NODE_MODULES)},
    )
    return {"true": True, "false": False}[done.stdout]


def _python_library_verifies(secret: str, body: bytes, headers: Mapping[str, str]) -> bool:
    """Verify with the `standardwebhooks` package, called as docs/webhooks.md says."""
    receiver_key = secret if secret.startswith("whsec_") else secret.encode()
    try:
        Webhook(receiver_key).verify(body, dict(headers))
    except WebhookVerificationError:
        return False
    return True


async def _form_routed_to_hook(
    api: httpx.AsyncClient,
    tenant: Tenant,
    peer_url: str,
    fields: dict[str, Any],
    secret: dict[str, str] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A form made with `fields` and a webhook destination to `peer_url` (with `secret`, or a
    generated one), routed, through the API; both as it answered."""
    secret = secret or {}
    form = await create(api, tenant, "/v1/forms", fields)
    hook = await create(
        api,
        tenant,
        "/v1/destinations",
        {"type": "webhook", "name": "Hook", "config": {"url": peer_url + "/hook"}, **secret},
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


@pytest.mark.parametrize(
    "typed",
    [None, "a secret the owner typed, 0123", "ünïcödé secret — typed by hand"],
    ids=["generated", "typed", "typed-non-ascii"],
)
async def test_webhook__both_signatures_verify_with_the_documented_calls_for_every_secret(
    services: Services, conn: Conn, tmp_path: Path, typed: str | None
) -> None:
    """The contract's verification calls, in Python and Node with the real Standard Webhooks
    libraries and by hand for `X-Postbag-Signature`, accept a generated and a typed secret,
    and refuse a tampered body."""
    acme = await make_tenant(conn, plan="self_hosted")
    with receiver() as peer:
        async with api_client(services) as api:
            form, hook = await _form_routed_to_hook(
                api, acme, peer.url, {"name": "Contact"}, {"secret": typed} if typed else None
            )
        async with submit_client(services) as client:
            posted = await client.post(
                f"/s/{form['id']}",
                content='{"message": "Zoë says hi"}'.encode(),
                headers={"Content-Type": "application/json", "Accept": "application/json"},
            )
        assert posted.status_code == 201, posted.text
        assert (await Deliverer(services).run_pass(now=utcnow(), budget=30))["sent"] == 1
    secret = typed or hook["secret"]
    [request] = peer.requests
    tampered = request.body.replace(b"hi", b"ho")
    for body, expected in ((request.body, True), (tampered, False)):
        assert _python_library_verifies(secret, body, request.headers) is expected
        assert (
            _seed_verifies(tmp_path, secret, body, request.headers["X-Postbag-Signature"])
            is expected
        )
        assert _node_library_verifies(tmp_path, secret, body, request.headers) is expected


async def test_webhook__a_whsec_secret_that_is_not_base64_is_refused(
    services: Services, conn: Conn
) -> None:
    """Receivers decode whatever follows `whsec_`: a secret they could not decode is refused
    when it is saved, not found out by every receiver."""
    acme = await make_tenant(conn, plan="self_hosted")
    async with api_client(services) as api:
        answer = await api.post(
            "/v1/destinations",
            json={
                "type": "webhook",
                "name": "Hook",
                "config": {"url": "https://hooks.example.com/x"},
                "secret": "whsec_not*base64*at*all*0123",
            },
            headers=acme.headers,
        )
    assert answer.status_code == 422, answer.text
    assert "base64" in answer.text
