"""The session sweep forgets dashboard sessions idle past their limit, and only those."""

from __future__ import annotations

from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from core.ticks.retention import run_retention
from tests.support.builders import make_tenant
from tests.support.dashboard import dashboard_client, sign_in
from tests.support.records import rows


async def test_retention__forgets_idle_dashboard_sessions_and_keeps_live_ones(
    services: Services, conn: Conn
) -> None:
    tenant = await make_tenant(conn)
    async with dashboard_client(services) as idle, dashboard_client(services) as live:
        await sign_in(idle, tenant.key)
        await conn.execute(
            "UPDATE dashboard_sessions SET last_seen_at = now() - interval '13 hours'"
        )
        await sign_in(live, tenant.key)
        stats = await run_retention(services, now=utcnow(), budget=10)
        assert stats["sessions_forgotten"] == 1
        assert len(await rows(conn, "SELECT 1 FROM dashboard_sessions")) == 1
        assert (await live.get("/app")).status_code == 200
        assert (await idle.get("/app")).status_code == 303
