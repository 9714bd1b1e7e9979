from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from core.destinations.teams import CUT_MARKER, MAX_BODY_BYTES, SHORTEST_CUT, adapter, escape
from core.destinations.text import ChatMessage, cut
from core.outbox.worker import Deliverer, WorkerOptions
from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from core.ticks.digests import run_digests
from tests.support.api import Recorder, api_client, assert_problem, create, error_fields
from tests.support.builders import (
    make_chat_delivery,
    make_tenant,
)
from tests.support.peers import Request, closed_port, hang, receiver, status
from tests.support.records import attempts, delivery
from tests.support.submit import submit_client

FAST = WorkerOptions(timeout=1, margin=0.1)
# The shape of a Workflows trigger URL: the `sig` query parameter is the credential.
TRIGGER = "/workflows/4f1c0d2e/triggers/manual/paths/invoke?api-version=1&sig=s3cr3t-SIG-value"
ACCEPTED = status(202)
MARKUP = "**bold** _it_ [link](https://evil.example) <at>Everyone</at> # h > q `c` - i \\"
SPECIAL = set("\\*_[]()#->`<")


def _card(request: Request) -> dict[str, Any]:
    """The Adaptive Card of a Workflows request, after checking the envelope around it."""
    assert request.method == "POST"
    assert request.headers["Content-Type"] == "application/json"
    body = json.loads(request.body)
    assert body["type"] == "message"
    [attachment] = body["attachments"]
    assert attachment["contentType"] == "application/vnd.microsoft.card.adaptive"
    assert attachment["contentUrl"] is None
    card: dict[str, Any] = attachment["content"]
    assert card["$schema"] == "http://adaptivecards.io/schemas/adaptive-card.json"
    assert (card["type"], card["version"]) == ("AdaptiveCard", "1.4")
    return card


def _shown(text: str) -> str:
    """What Teams shows for an escaped text: escapes dropped, paragraphs as lines."""
    return re.sub(r"\\(.)", r"\1", text.replace("\n\n", "\n"))


def _facts(card: dict[str, Any]) -> list[tuple[str, str]]:
    [facts] = [block["facts"] for block in card["body"] if block["type"] == "FactSet"]
    return [(_shown(fact["title"]), _shown(fact["value"])) for fact in facts]


def _texts(card: dict[str, Any]) -> list[str]:
    blocks = [block for block in card["body"] if block["type"] == "TextBlock"]
    assert all(block["wrap"] is True for block in blocks)
    return [_shown(block["text"]) for block in blocks]


def _unescaped(text: str) -> set[str]:
    """The Markdown characters in an escaped text that are not escaped."""
    return {char for char in re.sub(r"\\.", "", text) if char in SPECIAL}


async def _submit(services: Services, form: str, values: dict[str, Any]) -> str:
    async with submit_client(services) as visitor:
        response = await visitor.post(f"/s/{form}", json=values)
    assert response.status_code == 201, response.text
    receipt: str = response.json()["receipt"]
    return receipt


async def test_teams__submission_through_v1_posts_one_adaptive_card(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn)
    with receiver(ACCEPTED) as peer:
        async with api_client(services) as client:
            form = await create(
                client,
                acme,
                "/v1/forms",
                {"name": "Contact", "labels": {"name": "Your name", "subscribe": "News?"}},
            )
            channel = await create(
                client,
                acme,
                "/v1/destinations",
                {"type": "teams", "name": "Sales", "config": {"url": peer.url + TRIGGER}},
            )
            routes = f"/v1/forms/{form['id']}/routes"
            await create(client, acme, routes, {"destination_id": channel["id"]})
        values = {"name": "Ada", "email": "ada@example.com", "subscribe": True, "notes": ""}
        receipt = await _submit(services, form["id"], values)
        stats = await Deliverer(services, options=FAST).run_pass(now=utcnow(), budget=5)
    assert stats["sent"] == 1
    [request] = peer.requests
    assert request.path == TRIGGER
    card = _card(request)
    title, *_, footer = card["body"]
    assert (title["type"], title["weight"], title["size"]) == ("TextBlock", "Bolder", "Medium")
    assert _shown(title["text"]) == "New form submission: Contact"
    assert _facts(card) == [
        ("Your name", "Ada"),
        ("email", "ada@example.com"),
        ("News?", "Yes"),
        ("notes", "—"),
    ]
    assert (footer["isSubtle"], footer["size"]) == (True, "Small")
    assert _shown(footer["text"]).startswith(f"Receipt {receipt} · received 20")


async def test_teams__url_is_write_only_redacted_and_rotated_by_config(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn)
    recorder = Recorder()
    with receiver(ACCEPTED) as old, receiver(ACCEPTED) as new:
        async with api_client(services, recorder) as client:
            form = await create(client, acme, "/v1/forms", {"name": "Contact"})
            made = await create(
                client,
                acme,
                "/v1/destinations",
                {"type": "teams", "name": "Sales", "config": {"url": old.url + TRIGGER}},
            )
            await create(
                client, acme, f"/v1/forms/{form['id']}/routes", {"destination_id": made["id"]}
            )
            url = f"/v1/destinations/{made['id']}"
            got = (await client.get(url, headers=acme.headers)).json()
            assert got["config"] == {"url": f"{old.url}/workflows/…"}
            assert (got["secret_set"], got["secret_version"]) == (True, 1)
            before = await _submit(services, form["id"], {"n": 1})
            rotated = await client.patch(
                url, json={"config": {"url": new.url + TRIGGER}}, headers=acme.headers
            )
            assert rotated.status_code == 200, rotated.text
            assert rotated.json()["secret_version"] == 2
            assert rotated.json()["config"] == {"url": f"{new.url}/workflows/…"}
            separate = {"type": "teams", "name": "X", "config": {"url": old.url + TRIGGER}}
            for refused in (
                await client.post(
                    "/v1/destinations", json={**separate, "secret": "s3cr3t"}, headers=acme.headers
                ),
                await client.patch(url, json={"secret": "s3cr3t"}, headers=acme.headers),
            ):
                assert "secret" in error_fields(assert_problem(refused, 422, "invalid_secret"))
            after = await _submit(services, form["id"], {"n": 2})
        await Deliverer(services, options=FAST).run_pass(now=utcnow(), budget=5)
    assert "sig=" not in recorder.text() and "4f1c0d2e" not in recorder.text()
    # Queued before the rotation or after it: each attempt goes to the URL current then.
    assert old.requests == []
    receipts = sorted(_texts(_card(request))[-1].split()[1] for request in new.requests)
    assert receipts == sorted([before, after])


async def test_teams__markup_in_values_and_labels_is_escaped(
    services: Services, conn: Conn
) -> None:
    with receiver(ACCEPTED) as peer:
        await make_chat_delivery(
            conn, "teams", peer.url + TRIGGER, {"msg": MARKUP}, labels={"msg": MARKUP}
        )
        await Deliverer(services, options=FAST).run_pass(now=utcnow(), budget=5)
    card = _card(peer.requests[0])
    [fact] = next(block["facts"] for block in card["body"] if block["type"] == "FactSet")
    assert fact["title"] == fact["value"] == escape(MARKUP)
    assert _unescaped(fact["value"]) == set()
    assert _facts(card) == [(MARKUP, MARKUP)]


def test_teams__escape_leaves_no_markdown_and_keeps_each_line() -> None:
    text = "1. *a*\n> [b](c)\r\n<at>d</at> \\_e_"
    escaped = escape(text)
    assert _unescaped(escaped) == set()
    assert escaped.split("\n\n") == [escape(line) for line in text.splitlines()]
    assert _shown(escaped) == "1. *a*\n> [b](c)\n<at>d</at> \\_e_"


async def test_teams__value_over_the_limit_is_cut_and_delivered(
    services: Services, conn: Conn
) -> None:
    long = "word " * 12_000
    with receiver(ACCEPTED) as peer:
        _, dlv = await make_chat_delivery(
            conn, "teams", peer.url + TRIGGER, {"name": "Ada", "essay": long}
        )
        stats = await Deliverer(services, options=FAST).run_pass(now=utcnow(), budget=5)
    assert stats["sent"] == 1
    [request] = peer.requests
    assert len(request.body) <= MAX_BODY_BYTES < 28 * 1024
    (name, ada), (essay, shortened) = _facts(_card(request))
    assert (name, ada, essay) == ("name", "Ada", "essay")
    assert shortened.endswith(CUT_MARKER)
    assert long.startswith(shortened.removesuffix(CUT_MARKER))
    assert len(shortened) > 10_000
    assert (await delivery(conn, dlv))["status"] == "sent"


def test_teams__too_many_fields_for_one_card_are_counted() -> None:
    fields = [(f"field {n}", f"value {n} " * 20) for n in range(2_000)]
    message = ChatMessage(title="New form submission: Contact", fields=fields, text=None, footer="")
    body = adapter.body(message)
    assert len(json.dumps(body, ensure_ascii=False).encode()) <= MAX_BODY_BYTES
    card = body["attachments"][0]["content"]
    shown = _facts(card)
    assert 100 < len(shown) < len(fields)
    expected = [(label, cut(value, SHORTEST_CUT, CUT_MARKER)) for label, value in fields]
    assert shown == expected[: len(shown)]
    assert _texts(card)[-1] == f"{len(fields) - len(shown)} more fields not shown"


WORKFLOW_NOT_FOUND = json.dumps(
    {
        "error": {
            "code": "WorkflowNotFound",
            "message": "The workflow '4f1c0d2e' could not be found.",
        }
    }
).encode()
BAD_CONTENT = json.dumps(
    {"error": {"code": "InvalidRequestContent", "message": "x" * 600}}
).encode()

OUTCOMES: list[tuple[str, Any, str, str]] = [
    ("accepted", ACCEPTED, "sent", "sent (HTTP 202)"),
    ("ok", status(200), "sent", "sent (HTTP 200)"),
    ("server error", status(502), "failed", "http_502"),
    ("timeout", hang(3), "failed", "timeout"),
    ("not found", status(404, {}, WORKFLOW_NOT_FOUND), "dead", "http_404"),
    ("long refusal", status(400, {}, BAD_CONTENT), "dead", "http_400"),
    ("plain refusal", status(403, {}, b"Forbidden\nmore"), "dead", "http_403"),
]


@pytest.mark.parametrize(
    ("case", "respond", "outcome", "detail"), OUTCOMES, ids=[case for case, *_ in OUTCOMES]
)
async def test_teams__answers_are_classified(
    services: Services, conn: Conn, case: str, respond: Any, outcome: str, detail: str
) -> None:
    with receiver(respond) as peer:
        _, dlv = await make_chat_delivery(conn, "teams", peer.url + TRIGGER, {"name": "Ada"})
        await Deliverer(services, options=FAST).run_pass(now=utcnow(), budget=5)
    row = await delivery(conn, dlv)
    assert (row["status"], row["last_detail"]) == (outcome, detail), case
    assert len(peer.requests) == 1
    [attempt] = await attempts(conn, dlv)
    assert "s3cr3t" not in json.dumps(attempt, default=str)


async def test_teams__429_waits_for_retry_after(services: Services, conn: Conn) -> None:
    now = utcnow()
    throttled = json.dumps({"error": {"code": "WorkflowRequestsThrottled"}}).encode()
    with receiver(status(429, {"Retry-After": "1800"}, throttled)) as peer:
        _, dlv = await make_chat_delivery(conn, "teams", peer.url + TRIGGER, {"name": "Ada"})
        await Deliverer(services, options=FAST).run_pass(now=now, budget=5)
    row = await delivery(conn, dlv)
    assert (row["status"], row["last_detail"]) == ("failed", "http_429")
    assert 1800 <= (row["next_attempt_at"] - now).total_seconds() <= 1805


async def test_teams__connection_refused_is_retried(services: Services, conn: Conn) -> None:
    _, dlv = await make_chat_delivery(
        conn, "teams", f"http://127.0.0.1:{closed_port()}{TRIGGER}", {"n": 1}
    )
    await Deliverer(services, options=FAST).run_pass(now=utcnow(), budget=5)
    row = await delivery(conn, dlv)
    assert (row["status"], row["last_detail"]) == ("failed", "connection_error")


async def test_teams__digest_is_one_card(services: Services, conn: Conn) -> None:
    day = datetime(2027, 3, 1, tzinfo=UTC)
    with receiver(ACCEPTED) as peer:
        _, dlv = await make_chat_delivery(conn, "teams", peer.url + TRIGGER, {"n": 0})
        # The submission is the period's only one; its immediate delivery is not wanted.
        for sql in (
            "UPDATE routes SET mode = 'digest', period = 'daily', updated_at = %(at)s",
            "UPDATE submissions SET received_at = %(at)s + interval '9 hours'",
            "DELETE FROM deliveries WHERE id = %(dlv)s",
        ):
            await conn.execute(sql, {"at": day, "dlv": dlv})
        now = day + timedelta(days=1, hours=1)
        assert (await run_digests(services, now=now, budget=5))["digests"] == 1
        stats = await Deliverer(services, options=FAST).run_pass(now=now, budget=5)
    assert stats["sent"] == 1
    [request] = peer.requests
    card = _card(request)
    title, text = _texts(card)
    assert title == "1 new submission to Contact (2027-03-01)"
    assert text.startswith(f"{title}\n")
    assert "All of them: " in text
    assert not [block for block in card["body"] if block["type"] == "FactSet"]
