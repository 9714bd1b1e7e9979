"""The heartbeats pass forgets the heartbeats of workers long gone and keeps the others."""

from __future__ import annotations

from datetime import timedelta

from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from core.ticks.passes.heartbeats import HEARTBEAT_DAYS
from core.ticks.retention import run_retention
from tests.support.records import rows


async def test_retention__forgets_heartbeats_of_workers_long_gone(
    services: Services, conn: Conn
) -> None:
    now = utcnow()
    for worker, days in (("worker@gone:1", HEARTBEAT_DAYS + 1), ("worker@here:2", 0)):
        await conn.execute(
            "INSERT INTO worker_heartbeats (worker_id, tick, last_beat_at)"
            " VALUES (%(w)s, 'deliver', %(at)s)",
            {"w": worker, "at": now - timedelta(days=days)},
        )
    stats = await run_retention(services, now=now, budget=10)
    assert stats["heartbeats_pruned"] == 1
    kept = await rows(
        conn, "SELECT worker_id FROM worker_heartbeats WHERE worker_id LIKE 'worker@%%'"
    )
    assert kept == [{"worker_id": "worker@here:2"}]
