"""Every delivery ends: an adapter's exception is a failed attempt, an attempt cut short by
a crash counts, and a poison delivery ends `dead` with its event and alert."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
from datetime import timedelta
from typing import Any

import pytest
from aiosmtpd.smtp import Envelope

from core.outbox.worker import Deliverer, WorkerOptions
from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from tests.outbox.processes import until, worker
from tests.support.builders import TELEGRAM_TOKEN, make_delivery, make_route_to, setup_form
from tests.support.peers import Answer, Request, receiver, telegram_api
from tests.support.records import attempts, delivery, rows
from tests.support.settings import SENDER, with_settings

FAST = WorkerOptions(timeout=2, margin=0.1)


async def _dead_alerts_and_events(conn: Conn) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    alerts = await rows(conn, "SELECT kind, occurrences FROM alerts")
    events = await rows(
        conn, "SELECT data->>'reason' AS reason FROM events WHERE type = 'delivery.dead'"
    )
    return alerts, events


async def test_poison__an_adapter_that_raises_ends_dead_with_an_alert(
    services: Services, conn: Conn, smtp_server: tuple[str, list[Envelope]]
) -> None:
    """A stored recipient with a CR/LF (a row written past the API's checks) makes the email
    adapter raise, every time."""
    url, received = smtp_server
    mail = with_settings(services, email_provider="smtp", mail_from=SENDER, smtp_url=url)
    tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
    to = {"to": ["owner@example.com\r\nBcc: victim@example.com"]}
    dst, rte = await make_route_to(conn, tenant, form, type="email", config=to, secrets=())
    _, dlv = await make_delivery(
        conn,
        tenant,
        form,
        dst,
        rte,
        channel="email",
        target=to,
        values={"name": "Ada"},
        template={"subject": "From {{name}}", "labels": {}, "field_order": ["name"]},
        max_attempts=8,
        secret_version=None,
    )
    now = utcnow()
    for attempt in range(1, 9):
        stats = await Deliverer(mail, options=FAST).run_pass(now=now, budget=5)
        assert stats.get("errors", 0) == 0
        row = await delivery(conn, dlv)
        # Never left `sending`: each attempt ends with its outcome.
        assert (row["attempts"], row["claim_token"]) == (attempt, None)
        now = row["next_attempt_at"] + timedelta(seconds=1)
    assert (row["status"], row["reason"]) == ("dead", "attempts_exhausted")
    history = await attempts(conn, dlv)
    outcomes = [(a["outcome"], a["error_class"]) for a in history]
    assert outcomes == [("failed", "adapter_error")] * 7 + [("dead", "adapter_error")]
    assert {a["response_excerpt"] for a in history} == {"ValueError"}
    assert await _dead_alerts_and_events(conn) == (
        [{"kind": "delivery.dead", "occurrences": 1}],
        [{"reason": "attempts_exhausted"}],
    )
    assert received == []


@pytest.mark.slow
async def test_poison__a_worker_killed_mid_send_every_time_ends_dead(
    db_url: str, conn: Conn
) -> None:
    arrived = threading.Event()

    def respond(_r: Request) -> Answer:
        arrived.set()
        threading.Event().wait(30)  # never answers before the worker is killed
        return 200, {}, b"late"

    limit = 3
    with receiver(respond) as peer:
        tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
        dst, rte = await make_route_to(conn, tenant, form, config={"url": peer.url})
        _, dlv = await make_delivery(
            conn, tenant, form, dst, rte, target={"url": peer.url}, max_attempts=limit
        )
        for kill in range(1, limit + 1):
            process = worker(db_url)
            await until(lambda n=kill: len(peer.requests) == n, 30, f"send {kill}")
            os.kill(process.pid, signal.SIGKILL)
            process.wait()
            row = await delivery(conn, dlv)
            assert (row["status"], row["attempts"]) == ("sending", kill)
            # Its lease runs out (the time it would take, passed in the database).
            await conn.execute(
                "UPDATE deliveries SET claimed_until = now() - interval '1 second'"
                " WHERE id = %(id)s",
                {"id": dlv},
            )
        # The next worker finds the attempts spent: dead, without another send.
        process = worker(db_url)
        await asyncio.to_thread(process.wait, 60)
        assert process.returncode == 0
    assert len(peer.requests) == limit
    row = await delivery(conn, dlv)
    assert (row["status"], row["reason"], row["attempts"]) == ("dead", "attempts_exhausted", limit)
    history = await attempts(conn, dlv)
    assert [(a["attempt"], a["error_class"]) for a in history] == [
        (n, "interrupted") for n in range(1, limit + 1)
    ]
    assert await _dead_alerts_and_events(conn) == (
        [{"kind": "delivery.dead", "occurrences": 1}],
        [{"reason": "attempts_exhausted"}],
    )


async def test_poison__a_deeply_nested_value_is_sent_cut_short(
    services: Services, conn: Conn
) -> None:
    deep: Any = "bottom"
    for _ in range(900):
        deep = [deep]
    with receiver(telegram_api()) as api:
        bot = with_settings(services, telegram_api_url=api.url + "/")
        tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
        target = {"chat_id": "-100123"}
        dst, rte = await make_route_to(
            conn, tenant, form, type="telegram", config=target, secrets=(TELEGRAM_TOKEN,)
        )
        _, dlv = await make_delivery(
            conn,
            tenant,
            form,
            dst,
            rte,
            channel="telegram",
            target=target,
            values={"name": "Ada", "deep": deep},
            template={"labels": {}, "field_order": ["name", "deep"]},
            max_attempts=8,
        )
        stats = await Deliverer(bot, options=FAST).run_pass(now=utcnow(), budget=5)
    assert stats["sent"] == 1
    [request] = api.requests
    text = json.loads(request.body)["text"]
    assert "name: Ada" in text
    assert "deep: …" in text
    assert "bottom" not in text
    assert (await delivery(conn, dlv))["status"] == "sent"
