"""The emails the installation sends about people, through a real SMTP peer: a password
reset is queued (the same answer, as fast, for a member and a stranger) and sent by the
outbox worker, retried when the peer fails; at most RESET_BOUND per address and window
from any number of clients; each with its own Message-ID; an invitation quotes the
inviter's and organization's names on one line, capped, never as a link."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from email.message import EmailMessage
from email.parser import BytesParser
from email.policy import default as default_policy
from pathlib import Path
from typing import Any

import httpx
from aiosmtpd.smtp import Envelope

from core.http.api_app import create_api_app
from core.outbox.passes import WorkerOptions
from core.outbox.worker import Deliverer
from core.owner.members import RESET_BOUND
from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from tests.support.builders import make_member, make_tenant
from tests.support.dashboard import csrf_of, dashboard_client
from tests.support.fuzzing import served
from tests.support.mail import smtp_peer
from tests.support.peers import closed_port
from tests.support.records import rows
from tests.support.settings import SENDER, with_settings

PASSWORD = "correct horse battery"
FAST = WorkerOptions(timeout=5, margin=0.1)
# How long the slow peer takes to accept a message.
SLOW = 1.0


def _mailed(services: Services, url: str, **settings: Any) -> Services:
    return with_settings(
        services, email_provider="smtp", smtp_url=url, mail_from=SENDER, **settings
    )


def _parsed(received: list[Envelope]) -> list[EmailMessage]:
    parser = BytesParser(policy=default_policy)
    found = []
    for envelope in received:
        assert isinstance(envelope.content, bytes)
        found.append(parser.parsebytes(envelope.content))
    return found


def _text(mail: EmailMessage) -> str:
    body = mail.get_body(("plain",))
    assert body is not None
    return str(body.get_content())


@contextmanager
def _slow_smtp() -> Iterator[tuple[str, list[Envelope]]]:
    """A real SMTP server on loopback that takes SLOW seconds to accept each message."""
    received: list[Envelope] = []

    class Handler:
        async def handle_DATA(self, _server: Any, _session: Any, envelope: Envelope) -> str:
            await asyncio.sleep(SLOW)
            received.append(envelope)
            return "250 Message accepted for delivery"

    with smtp_peer(Handler()) as url:
        yield url, received


async def _forgot(client: httpx.AsyncClient, email: str, **headers: str) -> httpx.Response:
    page = await client.get("/app/forgot", headers=headers)
    return await client.post(
        "/app/forgot", data={"csrf": csrf_of(page.text), "email": email}, headers=headers
    )


async def test_reset__a_flood_from_20_client_addresses_sends_at_most_the_bound(
    services: Services, conn: Conn, smtp_server: tuple[str, list[Envelope]]
) -> None:
    acme = await make_tenant(conn)
    await make_member(conn, acme, email="ada@example.com", password=PASSWORD)
    mailed = _mailed(services, smtp_server[0], trusted_proxies=["127.0.0.1/32"])
    app = create_api_app(mailed)

    async def one_client(n: int) -> int:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8080"
        ) as client:
            answer = await _forgot(
                client, "ada@example.com", **{"X-Forwarded-For": f"203.0.113.{n}"}
            )
            assert "on its way" in answer.text
            return answer.status_code

    # Twenty clients at once, each within its own sign-in limit.
    assert await asyncio.gather(*(one_client(n) for n in range(1, 21))) == [200] * 20
    await Deliverer(mailed, options=FAST).run_pass(now=utcnow(), budget=10)
    received = smtp_server[1]
    assert len(received) == RESET_BOUND
    assert all(envelope.rcpt_tos == ["ada@example.com"] for envelope in received)


async def test_reset__two_genuine_resets_get_two_distinct_message_ids_and_links(
    services: Services, conn: Conn, smtp_server: tuple[str, list[Envelope]]
) -> None:
    acme = await make_tenant(conn)
    await make_member(conn, acme, email="ada@example.com", password=PASSWORD)
    mailed = _mailed(services, smtp_server[0])
    async with dashboard_client(mailed) as client:
        for _ in range(2):
            assert (await _forgot(client, "ada@example.com")).status_code == 200
            await Deliverer(mailed, options=FAST).run_pass(now=utcnow(), budget=10)
        first, second = _parsed(smtp_server[1])
        assert first["Message-ID"] != second["Message-ID"]
        links = [re.search(r"/app/reset/[\w-]+", _text(mail)) for mail in (first, second)]
        assert links[0] and links[1] and links[0].group() != links[1].group()
        for link in links:
            assert link is not None
            assert (await client.get(link.group())).status_code == 200
    sent = await rows(conn, "SELECT kind, status, attempts FROM deliveries ORDER BY id")
    assert sent == [{"kind": "account", "status": "sent", "attempts": 1}] * 2


async def test_invitation__a_key_name_with_a_newline_and_a_url_is_quoted_on_one_line_not_a_link(
    services: Services, conn: Conn, smtp_server: tuple[str, list[Envelope]]
) -> None:
    acme = await make_tenant(conn)
    name = "Ops\nUrgent: https://evil.example/login help@evil.example " + "x" * 100
    async with dashboard_client(_mailed(services, smtp_server[0])) as client:
        made = await client.post(
            "/v1/keys", json={"name": name, "role": "owner"}, headers=acme.headers
        )
        assert made.status_code == 201, made.text
        invited = await client.post(
            "/v1/members",
            json={"email": "bob@example.com", "role": "viewer"},
            headers={"Authorization": f"Bearer {made.json()['key']}"},
        )
        assert invited.status_code == 201, invited.text
    [mail] = _parsed(smtp_server[1])
    first = _text(mail).splitlines()[0]
    quoted = re.fullmatch(r"“([^“”]*)” invited you to “Acme” on Postbag, as viewer\.", first)
    assert quoted, first
    assert quoted.group(1).startswith(
        "Ops Urgent: https[:]//evil[.]example/login help@evil[.]example x"
    )
    assert len(quoted.group(1)) == 80 and quoted.group(1).endswith("…")
    text = _text(mail)
    assert "://evil" not in text and "evil.example" not in text
    assert not any("Urgent" in line for line in text.splitlines()[1:])
    assert mail["Subject"] == "You are invited to “Acme” on Postbag"


async def test_forgot__a_member_is_answered_as_fast_as_a_stranger_and_the_worker_retries_the_email(
    services: Services, conn: Conn, db_url: str, tmp_path: Path
) -> None:
    acme = await make_tenant(conn)
    await make_member(conn, acme, email="ada@example.com", password=PASSWORD)
    with (
        _slow_smtp() as (url, received),
        served(db_url, tmp_path, lambda own: create_api_app(_mailed(own, url))) as base,
    ):
        mailed = _mailed(services, url)
        # A real server: the time measured is the answer's, whatever runs after it.
        async with httpx.AsyncClient(base_url=base) as client:
            await _forgot(client, "warm@example.com")  # the first request's one-time costs

            async def timed(email: str) -> float:
                page = await client.get("/app/forgot")
                started = time.perf_counter()
                answer = await client.post(
                    "/app/forgot", data={"csrf": csrf_of(page.text), "email": email}
                )
                took = time.perf_counter() - started
                assert answer.status_code == 200 and "on its way" in answer.text
                return took

            member, stranger = [], []
            for _ in range(3):
                member.append(await timed("ada@example.com"))
                stranger.append(await timed("eve@example.com"))
        ratio = min(member) / min(stranger)
        assert ratio < 3, (member, stranger)
        assert received == []  # nothing is sent on the request path
        # The peer is down for the first pass: the emails stay queued and are retried.
        down = _mailed(services, f"smtp://127.0.0.1:{closed_port()}")
        await Deliverer(down, options=FAST).run_pass(now=utcnow(), budget=10)
        queued = await rows(
            conn, "SELECT status, attempts, next_attempt_at FROM deliveries ORDER BY id"
        )
        assert [(q["status"], q["attempts"]) for q in queued] == [("failed", 1)] * 3
        later = max(q["next_attempt_at"] for q in queued) + timedelta(seconds=1)
        await Deliverer(mailed, options=FAST).run_pass(now=later, budget=10)
    assert len(received) == 3
    assert all(envelope.rcpt_tos == ["ada@example.com"] for envelope in received)
    done = await rows(conn, "SELECT status, attempts FROM deliveries")
    assert done == [{"status": "sent", "attempts": 2}] * 3
