"""The drift pass forgets the hourly drift counts older than the drift summary's period."""

from __future__ import annotations

from datetime import timedelta

from core.owner.form_schemas import DRIFT_DAYS
from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from core.ticks.retention import run_retention
from tests.support.api import api_client
from tests.support.builders import setup_form
from tests.support.records import rows
from tests.support.submit import submit_client

JSON_ACCEPT = {"Accept": "application/json"}


async def test_drift__counts_past_the_drift_period_are_forgotten(
    services: Services, conn: Conn
) -> None:
    tenant, form = await setup_form(conn, plan="self_hosted", schema_mode="observe")
    async with api_client(services, tenant.key) as api:
        schema = {"type": "object", "required": ["email"]}
        added = await api.post(f"/v1/forms/{form}/schemas", json={"schema": schema})
        assert added.status_code == 201, added.text
    async with submit_client(services) as client:
        answer = await client.post(f"/s/{form}", json={"name": "Ada"}, headers=JSON_ACCEPT)
        assert answer.status_code == 201, answer.text
    assert len(await rows(conn, "SELECT 1 FROM schema_drift")) == 1
    now = utcnow()
    within = await run_retention(services, now=now + timedelta(days=DRIFT_DAYS - 1), budget=10)
    assert within["drift_pruned"] == 0
    past = await run_retention(services, now=now + timedelta(days=DRIFT_DAYS, hours=2), budget=10)
    assert past["drift_pruned"] == 1
    assert await rows(conn, "SELECT 1 FROM schema_drift") == []
