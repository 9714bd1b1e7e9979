from __future__ import annotations

import json

from core.outbox.worker import Deliverer, WorkerOptions
from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from tests.support.builders import TELEGRAM_TOKEN, make_delivery, make_route_to, setup_form
from tests.support.peers import receiver, telegram_api
from tests.support.records import attempts, delivery
from tests.support.settings import with_settings

FAST = WorkerOptions(timeout=2, margin=0.1)


async def _telegram_delivery(conn: Conn) -> tuple[str, str]:
    tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
    dst, rte = await make_route_to(
        conn,
        tenant,
        form,
        type="telegram",
        config={"chat_id": "-100123"},
        secrets=(TELEGRAM_TOKEN,),
    )
    return await make_delivery(
        conn,
        tenant,
        form,
        dst,
        rte,
        channel="telegram",
        target={"chat_id": "-100123"},
        values={"name": "Ada", "subscribe": True},
        template={"labels": {"name": "Name"}, "field_order": ["name", "subscribe"]},
        max_attempts=8,
    )


async def test_telegram__send_message_on_the_bot_api(services: Services, conn: Conn) -> None:
    with receiver(telegram_api()) as api:
        bot = with_settings(services, telegram_api_url=api.url + "/")
        sub, dlv = await _telegram_delivery(conn)
        stats = await Deliverer(bot, options=FAST).run_pass(now=utcnow(), budget=5)
    assert stats["sent"] == 1
    [request] = api.requests
    assert request.path == f"/bot{TELEGRAM_TOKEN}/sendMessage"
    body = json.loads(request.body)
    assert body["chat_id"] == "-100123"
    lines = body["text"].splitlines()
    assert lines[:4] == ["New form submission", "", "Name: Ada", "subscribe: Yes"]
    assert lines[-1].startswith(f"Receipt {sub}")
    row = await delivery(conn, dlv)
    assert row["status"] == "sent"
    [attempt] = await attempts(conn, dlv)
    assert TELEGRAM_TOKEN not in json.dumps(attempt, default=str)


async def test_telegram__retry_after_is_honoured(services: Services, conn: Conn) -> None:
    now = utcnow()
    with receiver(telegram_api(retry_after=1800)) as api:
        bot = with_settings(services, telegram_api_url=api.url)
        _, dlv = await _telegram_delivery(conn)
        await Deliverer(bot, options=FAST).run_pass(now=now, budget=5)
    row = await delivery(conn, dlv)
    assert (row["status"], row["last_detail"]) == ("failed", "http_429")
    assert 1800 <= (row["next_attempt_at"] - now).total_seconds() <= 1805
