"""The quota pass releases held deliveries once their organization is back within its plan."""

from __future__ import annotations

from core.platform.clock import month_of, utcnow
from core.platform.db import Conn
from core.platform.services import Services
from core.ticks.retention import run_retention
from tests.support.builders import setup_form
from tests.support.cli import postbag, subprocess_env
from tests.support.records import rows
from tests.support.submit import submit_client

JSON_ACCEPT = {"Accept": "application/json"}


async def test_quota__over_quota_deliveries_held_then_released_after_set_plan(
    services: Services, conn: Conn, db_url: str
) -> None:
    tenant, form = await setup_form(conn, plan="free")
    now = utcnow()
    await conn.execute(
        "INSERT INTO usage_counters (organization_id, month, submissions)"
        " VALUES (%(org)s, %(month)s, 100)",
        {"org": tenant.org, "month": month_of(now)},
    )
    async with submit_client(services) as client:
        response = await client.post(f"/s/{form}", data={"name": "Ada"}, headers=JSON_ACCEPT)
    assert response.status_code == 201
    [sub] = await rows(conn, "SELECT flags FROM submissions")
    assert sub["flags"] == ["over_quota"]
    [dlv] = await rows(conn, "SELECT held, status FROM deliveries")
    assert (dlv["held"], dlv["status"]) == (True, "pending")
    assert (await run_retention(services, now=now, budget=10))["released"] == 0

    result = postbag("set-plan", tenant.org, "pro", env=subprocess_env(POSTBAG_DATABASE_URL=db_url))
    assert result.returncode == 0, result.stderr
    assert (await run_retention(services, now=now, budget=10))["released"] == 1
    [dlv] = await rows(conn, "SELECT held, status FROM deliveries")
    assert (dlv["held"], dlv["status"]) == (False, "pending")
