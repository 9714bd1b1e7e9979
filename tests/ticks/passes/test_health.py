"""The health pass rolls each destination's last day of attempts up into its `health_stats`."""

from __future__ import annotations

from datetime import timedelta

from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from core.ticks.retention import run_retention
from tests.support.api import api_client
from tests.support.builders import (
    add_attempt,
    make_delivery,
    make_route_to,
    setup_form,
)
from tests.support.records import rows


async def test_health_rollup__success_rate_and_p95_in_the_destination(
    services: Services, conn: Conn
) -> None:
    tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
    dst, rte = await make_route_to(conn, tenant, form, config={"url": "https://example.com/h"})
    _, dlv = await make_delivery(
        conn, tenant, form, dst, rte, target={"url": "https://example.com/h"}
    )
    now = utcnow()
    for n in range(20):
        outcome = "failed" if n < 5 else "sent"
        at = now - timedelta(minutes=n)
        await add_attempt(
            conn, tenant, dlv, attempt=n + 1, at=at, duration_ms=(n + 1) * 10, outcome=outcome
        )
    # Older than a day: left out.
    old = now - timedelta(hours=25)
    await add_attempt(conn, tenant, dlv, attempt=99, at=old, duration_ms=99999, outcome="failed")
    await run_retention(services, now=now, budget=10)
    [row] = await rows(conn, "SELECT health_stats FROM destinations")
    stats = row["health_stats"]
    assert stats["attempts"] == 20
    assert stats["success_rate"] == 0.75
    assert stats["p95_duration_ms"] == 191

    async with api_client(services, tenant.key) as api:
        body = (await api.get(f"/v1/destinations/{dst}")).json()
    assert body["health_stats"]["success_rate"] == 0.75
