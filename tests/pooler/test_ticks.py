"""The scheduled passes through PgBouncer in transaction mode, two at once: each row is
worked once, and each pass leaves its heartbeat."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from core.ticks.digests import run_digests
from core.ticks.registry import TICKS, record_heartbeat
from core.ticks.retention import RetentionOptions, run_retention
from tests.support.builders import setup_form
from tests.support.records import rows
from tests.ticks.passes.test_expiry import _expired_rows
from tests.ticks.test_digests import DAY1, _digest_route, _submit


async def test_retention__two_passes_through_the_pooler_erase_each_row_once(
    pooled: Services, conn: Conn
) -> None:
    await _expired_rows(conn, 1_250)
    now = utcnow()
    results = await asyncio.gather(
        *(
            run_retention(pooled, now=now, budget=30, options=RetentionOptions(batch=100))
            for _ in range(2)
        )
    )
    assert sum(result.get("expired", 0) for result in results) == 1_250
    events = await rows(conn, "SELECT count(*) AS n FROM events WHERE type = 'submission.erased'")
    assert events == [{"n": 1_250}]


async def test_digest__two_passes_through_the_pooler_make_each_digest_once(
    pooled: Services, conn: Conn
) -> None:
    tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
    _, rte = await _digest_route(conn, tenant, form, period="hourly")
    for hour in range(12):
        await _submit(conn, tenant, form, DAY1 + timedelta(hours=hour, minutes=5))
    now = DAY1 + timedelta(hours=13)
    results = await asyncio.gather(*(run_digests(pooled, now=now, budget=10) for _ in range(2)))
    assert sum(result.get("digests", 0) for result in results) == 12
    made = await rows(
        conn,
        "SELECT count(*) AS n FROM deliveries WHERE kind = 'digest' AND route_id = %(r)s",
        r=rte,
    )
    assert made == [{"n": 12}]


async def test_heartbeats__every_tick_through_the_pooler(pooled: Services, conn: Conn) -> None:
    now = utcnow()
    for beat in range(8):  # more than psycopg's prepare threshold (5) on each connection
        for tick in TICKS.values():
            await record_heartbeat(
                pooled, tick, now=now + timedelta(seconds=beat), result={}, worker_id="w@pooler"
            )
    beats = await rows(conn, "SELECT tick, last_beat_at FROM worker_heartbeats ORDER BY tick")
    assert [(beat["tick"], beat["last_beat_at"]) for beat in beats] == [
        (name, now + timedelta(seconds=7)) for name in sorted(TICKS)
    ]
