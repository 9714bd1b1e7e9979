from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from core.destinations.slack import escaped_within
from core.outbox.worker import Deliverer, WorkerOptions
from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from core.ticks.digests import run_digests
from tests.support.api import api_client, assert_problem, create
from tests.support.builders import (
    Tenant,
    make_chat_delivery,
    make_tenant,
)
from tests.support.peers import Answer, Request, closed_port, hang, receiver, status
from tests.support.records import attempts, delivery, rows
from tests.support.submit import submit_client

FAST = WorkerOptions(timeout=1, margin=0.1)
JSON_ACCEPT = {"Accept": "application/json"}
# The part of an incoming-webhook URL that is the credential.
HOOK = "/services/T0001/B0002/xoxSecretWebhookToken"


def slack_ok(_r: Request) -> Answer:
    return 200, {"Content-Type": "text/html"}, b"ok"


async def _wired(
    services: Services, conn: Conn, url: str, *, route: dict[str, Any] | None = None
) -> tuple[Tenant, str, str]:
    """Through /v1: a form with labels, a Slack destination at `url` and a route to it."""
    acme = await make_tenant(conn, plan="pro")
    async with api_client(services) as client:
        form = await create(
            client,
            acme,
            "/v1/forms",
            {"name": "Contact", "labels": {"name": "Name", "email": "Email address"}},
        )
        dst = await create(
            client,
            acme,
            "/v1/destinations",
            {"type": "slack", "name": "Team", "config": {"url": url}},
        )
        await create(
            client,
            acme,
            f"/v1/forms/{form['id']}/routes",
            {"destination_id": dst["id"], **(route or {})},
        )
    return acme, form["id"], dst["id"]


async def _submit(services: Services, form: str, data: dict[str, str]) -> str:
    async with submit_client(services) as client:
        response = await client.post(f"/s/{form}", data=data, headers=JSON_ACCEPT)
    assert response.status_code == 201, response.text
    receipt: str = response.json()["receipt"]
    return receipt


async def _sent_body(services: Services, conn: Conn, values: dict[str, Any], **kw: Any) -> Any:
    """Deliver one Slack message to a peer and return the JSON it received."""
    with receiver(slack_ok) as peer:
        _, dlv = await make_chat_delivery(conn, "slack", peer.url + HOOK, values, **kw)
        await Deliverer(services, options=FAST).run_pass(now=utcnow(), budget=5)
    assert (await delivery(conn, dlv))["status"] == "sent"
    [request] = peer.requests
    return json.loads(request.body)


def _section_texts(body: dict[str, Any]) -> list[str]:
    return [b["text"]["text"] for b in body["blocks"] if b["type"] == "section"]


async def test_slack__a_submission_posts_one_block_kit_message(
    services: Services, conn: Conn
) -> None:
    with receiver(slack_ok) as peer:
        _, form, _ = await _wired(services, conn, peer.url + HOOK)
        receipt = await _submit(
            services,
            form,
            {"name": "Ada", "email": "ada@example.com", "message": "Hi", "subscribe": "true"},
        )
        await Deliverer(services, options=FAST).run_pass(now=utcnow(), budget=5)
    [request] = peer.requests
    assert (request.method, request.path) == ("POST", HOOK)
    assert request.headers["Content-Type"] == "application/json"
    body = json.loads(request.body)
    assert body["text"] == "New form submission: Contact"
    assert (body["unfurl_links"], body["unfurl_media"]) == (False, False)
    header, section, context = body["blocks"]
    assert header == {
        "type": "header",
        "text": {"type": "plain_text", "text": "New form submission: Contact"},
    }
    lines = "*Name:* Ada\n*Email address:* ada@example.com\n*message:* Hi\n*subscribe:* true"
    assert section == {
        "type": "section",
        "text": {"type": "mrkdwn", "text": lines, "verbatim": True},
    }
    assert context["type"] == "context"
    [footer] = context["elements"]
    assert footer["type"] == "mrkdwn"
    assert footer["text"].startswith(f"Receipt {receipt} · received ")
    [row] = await rows(conn, "SELECT * FROM deliveries")
    assert (row["channel"], row["max_attempts"], row["status"]) == ("slack", 8, "sent")
    assert row["target"] == {"url": f"{peer.url}/services/…"}
    assert "xoxSecretWebhookToken" not in json.dumps(await attempts(conn, row["id"]), default=str)


async def test_slack__the_url_is_write_only(services: Services, conn: Conn) -> None:
    url = "https://hooks.slack.com" + HOOK
    acme = await make_tenant(conn)
    async with api_client(services) as client:
        made = await create(
            client,
            acme,
            "/v1/destinations",
            {"type": "slack", "name": "Team", "config": {"url": url}},
        )
        path = f"/v1/destinations/{made['id']}"
        got = await client.get(path, headers=acme.headers)
        listed = await client.get("/v1/destinations", headers=acme.headers)
        with_secret = await client.post(
            "/v1/destinations",
            json={"type": "slack", "name": "T", "config": {"url": url}, "secret": url},
            headers=acme.headers,
        )
        patched_secret = await client.patch(path, json={"secret": url}, headers=acme.headers)
        no_url = await client.post(
            "/v1/destinations",
            json={"type": "slack", "name": "T", "config": {}},
            headers=acme.headers,
        )
    body = got.json()
    assert body["config"] == {"url": "https://hooks.slack.com/services/…"}
    assert (body["secret_set"], body["secret_version"]) == (True, 1)
    assert made["secret"] is None
    for response in (got, listed):
        assert "xoxSecretWebhookToken" not in response.text
    assert "secret" in {
        e["field"] for e in assert_problem(with_secret, 422, "invalid_secret")["errors"]
    }
    assert_problem(patched_secret, 422, "invalid_secret")
    assert_problem(no_url, 422, "invalid_config")


async def test_slack__a_new_url_takes_every_delivery_not_yet_sent(
    services: Services, conn: Conn
) -> None:
    with receiver(slack_ok) as old, receiver(slack_ok) as new:
        acme, form, dst = await _wired(services, conn, old.url + HOOK)
        before = await _submit(services, form, {"name": "Before"})
        async with api_client(services) as client:
            patched = await client.patch(
                f"/v1/destinations/{dst}",
                json={"config": {"url": new.url + "/services/T9/B9/rotatedToken"}},
                headers=acme.headers,
            )
        after = await _submit(services, form, {"name": "After"})
        await Deliverer(services, options=FAST).run_pass(now=utcnow(), budget=5)
    assert patched.status_code == 200, patched.text
    assert (patched.json()["config"], patched.json()["secret_version"]) == (
        {"url": f"{new.url}/services/…"},
        2,
    )
    assert "rotatedToken" not in patched.text
    # Queued before the new URL or after it: each attempt goes to the URL current then.
    assert old.requests == []
    assert {request.path for request in new.requests} == {"/services/T9/B9/rotatedToken"}
    bodies = sorted(request.body.decode() for request in new.requests)
    assert len(bodies) == 2 and any(before in b for b in bodies) and any(after in b for b in bodies)


async def test_slack__markup_and_mentions_in_values_and_labels_stay_text(
    services: Services, conn: Conn
) -> None:
    body = await _sent_body(
        services,
        conn,
        {"note": "<!channel> & <http://evil.example|click> @here #general"},
        template={
            "form_name": "Q&A <Team>",
            "labels": {"note": "Note <b>&</b>"},
            "field_order": ["note"],
        },
    )
    assert _section_texts(body) == [
        "*Note &lt;b&gt;&amp;&lt;/b&gt;:* "
        "&lt;!channel&gt; &amp; &lt;http://evil.example|click&gt; @here #general"
    ]
    # `verbatim` keeps Slack from turning the bare @here and #general into a mention or link.
    assert all(b["text"]["verbatim"] for b in body["blocks"] if b["type"] == "section")
    # The fallback is mrkdwn (escaped); the header is plain_text, which Slack does not parse.
    assert body["text"] == "New form submission: Q&amp;A &lt;Team&gt;"
    assert body["blocks"][0]["text"]["text"] == "New form submission: Q&A <Team>"


async def test_slack__a_value_beyond_the_section_limit_is_cut_and_delivered(
    services: Services, conn: Conn
) -> None:
    body = await _sent_body(
        services,
        conn,
        {"long": "&" * 4000, "after": "kept"},
        template={"form_name": "F" * 200, "field_order": ["long", "after"]},
    )
    first, second = _section_texts(body)
    # Cut between entities, never inside one.
    assert first == "*long:* " + "&amp;" * 598 + "…"
    assert second == "*after:* kept"
    header = body["blocks"][0]["text"]["text"]
    assert len(header) == 150 and header.endswith("F…")


async def test_slack__more_lines_than_fifty_blocks_hold_are_counted(
    services: Services, conn: Conn
) -> None:
    values = {f"field{n:02}": "y" * 2900 for n in range(60)}
    body = await _sent_body(services, conn, values)
    assert len(body["blocks"]) == 50
    texts = _section_texts(body)
    assert len(texts) == 48 and all(len(text) <= 3000 for text in texts)
    assert texts[-2].startswith("*field46:* ")
    assert texts[-1] == "_… 13 more lines not shown_"


def test_slack__escaped_within_counts_the_entities() -> None:
    assert escaped_within("a<b", 10) == "a&lt;b"
    assert escaped_within("<<<<", 9) == "&lt;&lt;…"
    assert escaped_within("plain", 5) == "plain"
    assert escaped_within("plain!", 5) == "plai…"


OUTCOMES: list[tuple[str, Callable[[Request], Answer], str, str]] = [
    # name, answer, status, last_detail
    ("200", slack_ok, "sent", "sent (HTTP 200)"),
    ("500", status(500, body=b"rollup_error"), "failed", "http_500"),
    ("503", status(503), "failed", "http_503"),
    ("timeout", hang(2.0), "failed", "timeout"),
    ("400", status(400, body=b"invalid_payload"), "dead", "http_400"),
    ("403", status(403, body=b"action_prohibited"), "dead", "http_403"),
    ("404", status(404, body=b"channel_not_found"), "dead", "http_404"),
    ("404 service", status(404, body=b"no_service"), "dead", "http_404"),
    ("410", status(410, body=b"channel_is_archived"), "dead", "http_410"),
]


@pytest.mark.parametrize(
    ("answer", "expected", "detail"),
    [case[1:] for case in OUTCOMES],
    ids=[case[0] for case in OUTCOMES],
)
async def test_slack__outcomes(
    services: Services,
    conn: Conn,
    answer: Callable[[Request], Answer],
    expected: str,
    detail: str,
) -> None:
    with receiver(answer) as peer:
        _, dlv = await make_chat_delivery(conn, "slack", peer.url + HOOK, {"name": "Ada"})
        await Deliverer(services, options=FAST).run_pass(now=utcnow(), budget=5)
    row = await delivery(conn, dlv)
    assert (row["status"], row["last_detail"], row["attempts"]) == (expected, detail, 1)
    assert len(peer.requests) == 1


async def test_slack__429_waits_for_retry_after(services: Services, conn: Conn) -> None:
    now = utcnow()
    with receiver(status(429, {"Retry-After": "1800"}, b"rate_limited")) as peer:
        _, dlv = await make_chat_delivery(conn, "slack", peer.url + HOOK, {"name": "Ada"})
        await Deliverer(services, options=FAST).run_pass(now=now, budget=5)
    row = await delivery(conn, dlv)
    assert (row["status"], row["last_detail"]) == ("failed", "http_429")
    assert 1800 <= (row["next_attempt_at"] - now).total_seconds() <= 1805


async def test_slack__a_connection_error_is_retried(services: Services, conn: Conn) -> None:
    _, dlv = await make_chat_delivery(
        conn, "slack", f"http://127.0.0.1:{closed_port()}{HOOK}", {"name": "Ada"}
    )
    await Deliverer(services, options=FAST).run_pass(now=utcnow(), budget=5)
    row = await delivery(conn, dlv)
    assert (row["status"], row["last_detail"]) == ("failed", "connection_error")


async def test_slack__a_digest_is_one_message(services: Services, conn: Conn) -> None:
    with receiver(slack_ok) as peer:
        _, form, _ = await _wired(
            services, conn, peer.url + HOOK, route={"mode": "digest", "period": "daily"}
        )
        receipts = [await _submit(services, form, {"name": name}) for name in ("Ada", "Grace")]
        closed = utcnow() + timedelta(days=1, hours=1)
        await run_digests(services, now=closed, budget=10)
        await Deliverer(services, options=FAST).run_pass(now=closed, budget=5)
    [request] = peer.requests
    body = json.loads(request.body)
    header, section = body["blocks"]
    title = header["text"]["text"]
    assert title.startswith("2 new submissions to Contact (")
    assert body["text"] == title
    text = section["text"]["text"]
    assert text.startswith(title + "\n\n")
    assert all(f"{receipt} · " in text for receipt in receipts)
    assert "All of them: " in text
    [row] = await rows(
        conn, "SELECT kind, channel, max_attempts, status FROM deliveries WHERE kind = 'digest'"
    )
    assert row == {"kind": "digest", "channel": "slack", "max_attempts": 8, "status": "sent"}
