from __future__ import annotations

from datetime import UTC, datetime, timedelta

from core.platform.db import Conn
from core.platform.services import Services
from tests.support.api import EMAIL, api_client, create
from tests.support.builders import make_tenant


async def test_usage__plan_limits_and_this_months_counted_submissions(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn, plan="pro")
    now = datetime.now(UTC)
    this_month = now.date().replace(day=1)
    last_month = (this_month - timedelta(days=1)).replace(day=1)
    await conn.execute(
        "INSERT INTO usage_counters (organization_id, month, submissions, review_bytes) VALUES"
        " (%(org)s, %(this)s, 42, 2048), (%(org)s, %(last)s, 999, 1)",
        {"org": acme.scope.organization_id, "this": this_month, "last": last_month},
    )
    async with api_client(services) as client:
        await create(client, acme, "/v1/forms", {"name": "C"})
        await create(client, acme, "/v1/destinations", EMAIL)
        response = await client.get("/v1/usage", headers=acme.headers)
    assert response.status_code == 200
    assert response.json() == {
        "plan": "pro",
        "month": now.strftime("%Y-%m"),
        "submissions": 42,
        "attachment_bytes": 0,
        "review_bytes": 2048,
        "forms": 1,
        "destinations": 1,
        "api_keys": 1,
        "streams": 0,
        "events": 0,
        "limits": {
            "forms": 50,
            "destinations": 50,
            "monthly_submissions": 10_000,
            "retention_days": 365,
            "spam_retention_days": 30,
            "api_keys": 25,
            "schema_versions_per_form": 100,
            "monthly_attachment_bytes": 10 * 1024**3,
            "streams": 20,
            "monthly_events": 100_000,
            "monthly_review_bytes": 1024**3,
        },
    }


async def test_usage__no_counter_yet_is_zero_and_self_hosted_mostly_unlimited(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn, plan="self_hosted")
    async with api_client(services) as client:
        body = (await client.get("/v1/usage", headers=acme.headers)).json()
    assert (body["plan"], body["submissions"]) == ("self_hosted", 0)
    limits = body["limits"]
    # Spam is kept 30 days and inferred schema versions stay bounded on every plan.
    assert (limits.pop("spam_retention_days"), limits.pop("schema_versions_per_form")) == (30, 1000)
    assert set(limits.values()) == {None}
