from __future__ import annotations

import json
import math
import re
import tracemalloc
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from core.destinations.chat import redact_url
from core.outbox.backoff import MAX_DELAY
from core.outbox.worker import Deliverer, WorkerOptions
from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.ids import new_id
from core.platform.services import Services
from core.ticks.digests import run_digests
from tests.support.api import api_client, assert_problem, create, error_fields
from tests.support.builders import (
    make_chat_delivery,
    make_route_to,
    make_submission,
    make_tenant,
    setup_form,
)
from tests.support.peers import Answer, Request, closed_port, hang, receiver, status
from tests.support.records import attempts, delivery
from tests.support.submit import submit_client

FAST = WorkerOptions(timeout=2, margin=0.1)
TOKEN = "oldTokenAbcdefghijklmnopqrstuvwxyz0123456789"
HOOK = f"/api/webhooks/112233445566778899/{TOKEN}"
ROTATED = "/api/webhooks/112233445566778899/newTokenZyxwvutsrqponmlkjihgfedcba9876543210"
NO_MENTIONS = {"parse": []}


def _embed(request: Request) -> dict[str, Any]:
    """The one embed of a Discord webhook request, after checking the request's shape."""
    assert request.method == "POST"
    assert request.headers["Content-Type"] == "application/json"
    body = json.loads(request.body)
    assert body["allowed_mentions"] == NO_MENTIONS
    assert set(body) == {"embeds", "allowed_mentions"}
    [embed] = body["embeds"]
    return dict(embed)


def _shown(text: str) -> str:
    """What Discord shows of escaped text: escapes dropped, the zero-width break unseen."""
    return re.sub(r"\\(.)", r"\1", text).replace("\u200b", "")


async def test_discord__submission_end_to_end_through_v1(services: Services, conn: Conn) -> None:
    acme = await make_tenant(conn)
    with receiver(status(204)) as peer:
        async with api_client(services) as client:
            form = await create(
                client,
                acme,
                "/v1/forms",
                {"name": "Contact", "labels": {"name": "Your name", "message": "Message"}},
            )
            dst = await create(
                client,
                acme,
                "/v1/destinations",
                {"type": "discord", "name": "Team", "config": {"url": peer.url + HOOK}},
            )
            await create(
                client, acme, f"/v1/forms/{form['id']}/routes", {"destination_id": dst["id"]}
            )
            async with submit_client(services) as public:
                posted = await public.post(
                    f"/s/{form['id']}",
                    json={"name": "Ada", "email": "ada@example.com", "message": "", "news": True},
                    headers={"Accept": "application/json"},
                )
            assert posted.status_code == 201, posted.text
            receipt = posted.json()["receipt"]
            stats = await Deliverer(services, options=FAST).run_pass(now=utcnow(), budget=5)
            detail = await client.get(f"/v1/submissions/{receipt}", headers=acme.headers)
    assert stats["sent"] == 1
    [request] = peer.requests
    assert request.path == HOOK
    embed = _embed(request)
    assert embed["title"] == "New form submission: Contact"
    assert embed["description"].splitlines() == [
        "Your name: Ada",
        "email: ada@example.com",
        "Message: —",
        "news: Yes",
    ]
    assert embed["footer"]["text"].startswith(f"Receipt {receipt} · received ")
    [line] = detail.json()["deliveries"]
    assert (line["channel"], line["status"]) == ("discord", "sent")
    assert line["target"] == {"url": f"{peer.url}/api/…"}
    assert TOKEN not in detail.text


async def test_discord__url_is_write_only_and_a_new_one_rotates_it(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn)
    with receiver(status(204)) as peer:
        async with api_client(services) as client:
            # Both deliveries go in one pass: above Discord's default rate (0.5 a second).
            body = {
                "type": "discord",
                "name": "Team",
                "config": {"url": peer.url + HOOK},
                "rate_limit": {"per_second": 100},
            }
            separate = await client.post(
                "/v1/destinations",
                json={**body, "secret": "a-separate-secret"},
                headers=acme.headers,
            )
            assert "secret" in error_fields(assert_problem(separate, 422, "invalid_secret"))
            made = await create(client, acme, "/v1/destinations", body)
            url = f"/v1/destinations/{made['id']}"
            got = await client.get(url, headers=acme.headers)
            assert got.json()["config"] == {"url": f"{peer.url}/api/…"}
            assert (got.json()["secret_set"], got.json()["secret_version"]) == (True, 1)
            assert TOKEN not in got.text and TOKEN not in made["config"]["url"]
            refused = await client.patch(url, json={"secret": "x" * 32}, headers=acme.headers)
            assert_problem(refused, 422, "invalid_secret")

            form = await create(client, acme, "/v1/forms", {"name": "Contact"})
            await create(
                client, acme, f"/v1/forms/{form['id']}/routes", {"destination_id": made["id"]}
            )
            receipts = []
            async with submit_client(services) as public:
                for n in range(2):
                    posted = await public.post(
                        f"/s/{form['id']}", json={"n": n}, headers={"Accept": "application/json"}
                    )
                    receipts.append(posted.json()["receipt"])
                    if n == 0:
                        rotated = await client.patch(
                            url, json={"config": {"url": peer.url + ROTATED}}, headers=acme.headers
                        )
                        assert rotated.status_code == 200, rotated.text
                        assert rotated.json()["secret_version"] == 2
                        assert rotated.json()["config"] == {"url": f"{peer.url}/api/…"}
            await Deliverer(services, options=FAST).run_pass(now=utcnow(), budget=5)
    paths = {_embed(r)["footer"]["text"].split()[1]: r.path for r in peer.requests}
    # Queued before the rotation or after it: each attempt goes to the URL current then.
    assert paths == {receipts[0]: ROTATED, receipts[1]: ROTATED}


async def test_discord__markup_and_mentions_in_values_and_labels_are_escaped(
    services: Services, conn: Conn
) -> None:
    label = "# _Name_ > [x]"
    value = "**bold** ||hidden|| `code` ~~gone~~ [click](https://evil.example) @everyone @here <@1>"
    with receiver(status(204)) as peer:
        _, dlv = await make_chat_delivery(
            conn,
            "discord",
            peer.url + HOOK,
            {"name": value, "site": "https://a.example/x_y"},
            labels={"name": label},
        )
        await Deliverer(services, options=FAST).run_pass(now=utcnow(), budget=5)
    assert (await delivery(conn, dlv))["status"] == "sent"
    first, second = _embed(peer.requests[0])["description"].splitlines()
    assert first == (
        r"\# \_Name\_ \> \[x\]: \*\*bold\*\* \|\|hidden\|\| \`code\` \~\~gone\~\~"
        r" \[click\]\(https://evil.example)"
        " @\u200beveryone @\u200bhere \\<@1\\>"
    )
    assert _shown(first) == f"{label}: {value}"
    assert second == "site: https://a.example/x_y"  # a link stays a link


async def test_discord__long_values_are_cut_within_discords_limits(
    services: Services, conn: Conn
) -> None:
    values = {"story": "x" * 5000, "name": "Ada", **{f"q{n}": "y" * 1500 for n in range(5)}}
    with receiver(status(204)) as peer:
        _, dlv = await make_chat_delivery(conn, "discord", peer.url + HOOK, values)
        await Deliverer(services, options=FAST).run_pass(now=utcnow(), budget=5)
    assert (await delivery(conn, dlv))["status"] == "sent"
    embed = _embed(peer.requests[0])
    description = embed["description"]
    lines = description.splitlines()
    assert lines[0] == "story: " + "x" * 1023 + "…"
    assert lines[1] == "name: Ada"
    assert lines[2] == "q0: " + "y" * 1023 + "…"
    assert len(description) == 4096 and description.endswith("…")
    assert len(embed["title"]) + len(description) + len(embed["footer"]["text"]) <= 6000


async def test_discord__a_template_repeating_a_long_value_renders_only_its_output(
    services: Services, conn: Conn
) -> None:
    # 2,000 placeholders of a 250 KB value: rendered in full, half a gigabyte per attempt.
    values = {"story": "x" * 250_000}
    template = {"text": "{{story}} " * 2_000, "field_order": ["story"], "form_name": "Contact"}
    with receiver(status(204)) as peer:
        _, dlv = await make_chat_delivery(
            conn, "discord", peer.url + HOOK, values, template=template
        )
        tracemalloc.start()
        try:
            await Deliverer(services, options=FAST).run_pass(now=utcnow(), budget=5)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert (await delivery(conn, dlv))["status"] == "sent"
    description = _embed(peer.requests[0])["description"]
    assert len(description) == 4096 and description.startswith("x" * 4000)
    assert peak < 20 * 1024 * 1024, f"{peak / 1e6:.0f} MB while sending"


DISCORD_404 = json.dumps({"message": "Unknown Webhook", "code": 10015}).encode()
# Longer than the kept excerpt: the code and message are still found.
DISCORD_400 = json.dumps(
    {
        "message": "Invalid Form Body",
        "code": 50035,
        "errors": {"embeds": {"0": {"description": {"_errors": [{"message": "x" * 600}]}}}},
    }
).encode()

OUTCOMES: list[tuple[str, Callable[[Request], Answer], str, str]] = [
    # name, answer, status, last_detail
    ("204", status(204), "sent", "sent (HTTP 204)"),
    ("200 with wait", status(200, body=b'{"id": "1"}'), "sent", "sent (HTTP 200)"),
    ("500", status(500), "failed", "http_500"),
    ("502", status(502, body=b"<html>bad gateway</html>"), "failed", "http_502"),
    ("timeout", hang(3.0), "failed", "timeout"),
    ("404", status(404, body=DISCORD_404), "dead", "http_404"),
    ("400", status(400, body=DISCORD_400), "dead", "http_400"),
    ("401 text", status(401, body=b"401: Unauthorized\n"), "dead", "http_401"),
]


@pytest.mark.parametrize(
    ("answer", "expected", "detail"),
    [case[1:] for case in OUTCOMES],
    ids=[case[0] for case in OUTCOMES],
)
async def test_discord__outcomes(
    services: Services,
    conn: Conn,
    answer: Callable[[Request], Answer],
    expected: str,
    detail: str,
) -> None:
    with receiver(answer) as peer:
        _, dlv = await make_chat_delivery(conn, "discord", peer.url + HOOK, {"name": "Ada"})
        await Deliverer(services, options=FAST).run_pass(now=utcnow(), budget=5)
    assert len(peer.requests) == 1
    row = await delivery(conn, dlv)
    assert (row["status"], row["last_detail"], row["attempts"]) == (expected, detail, 1)
    assert row["max_attempts"] == 8
    assert TOKEN not in json.dumps(await attempts(conn, dlv), default=str)


async def test_discord__connection_error_is_retried(services: Services, conn: Conn) -> None:
    _, dlv = await make_chat_delivery(
        conn, "discord", f"http://127.0.0.1:{closed_port()}{HOOK}", {"name": "Ada"}
    )
    await Deliverer(services, options=FAST).run_pass(now=utcnow(), budget=5)
    row = await delivery(conn, dlv)
    assert (row["status"], row["last_detail"]) == ("failed", "connection_error")


@pytest.mark.parametrize(
    ("headers", "body", "seconds"),
    [
        ({"Retry-After": "1800"}, {"retry_after": 1799.25, "global": False}, 1800),
        ({}, {"retry_after": 1800.5, "global": False}, 1801),
        ({"Retry-After": "1800"}, None, 1800),
        ({"Retry-After": "99999999"}, {"retry_after": math.inf, "global": False}, MAX_DELAY),
    ],
    ids=["header and body", "body only", "header only", "past the cap"],
)
async def test_discord__429_waits_at_least_discords_hint(
    services: Services,
    conn: Conn,
    headers: dict[str, str],
    body: dict[str, Any] | None,
    seconds: float,
) -> None:
    now = utcnow()
    answer = json.dumps(body).encode() if body else b"<html>rate limited</html>"
    with receiver(status(429, headers, answer)) as peer:
        _, dlv = await make_chat_delivery(conn, "discord", peer.url + HOOK, {"name": "Ada"})
        await Deliverer(services, options=FAST).run_pass(now=now, budget=5)
    row = await delivery(conn, dlv)
    assert (row["status"], row["last_detail"]) == ("failed", "http_429")
    assert seconds <= (row["next_attempt_at"] - now).total_seconds() <= seconds + 5


async def test_discord__a_digest_is_one_message(services: Services, conn: Conn) -> None:
    day = datetime(2027, 3, 1, tzinfo=UTC)
    tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
    with receiver(status(204)) as peer:
        url = peer.url + HOOK
        _, rte = await make_route_to(
            conn, tenant, form, type="discord", config={"url": redact_url(url)}, secrets=(url,)
        )
        await conn.execute(
            "UPDATE routes SET mode = 'digest', period = 'daily', updated_at = %(at)s"
            " WHERE id = %(rte)s",
            {"rte": rte, "at": day},
        )
        receipts = [new_id("sub") for _ in range(3)]
        for n, sub in enumerate(receipts):
            await make_submission(
                conn, tenant, form, {"n": 1}, id=sub, received_at=day + timedelta(hours=n)
            )
        now = day + timedelta(days=1, hours=1)
        assert (await run_digests(services, now=now, budget=10))["digests"] == 1
        stats = await Deliverer(services, options=FAST).run_pass(now=now, budget=5)
    assert stats["sent"] == 1
    [request] = peer.requests
    embed = _embed(request)
    assert _shown(embed["title"]) == "3 new submissions to Contact (2027-03-01)"
    assert "footer" not in embed
    lines = embed["description"].splitlines()
    assert [_shown(line).split(" · ")[0] for line in lines[2:5]] == receipts
    # The link to all of them stays a link: nothing in it is escaped.
    assert re.fullmatch(
        r"All of them: http://[^\\\s]+/v1/submissions\?form=frm_[^\\\s]+", lines[-1]
    )
