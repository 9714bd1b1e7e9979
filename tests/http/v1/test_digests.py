from __future__ import annotations

from datetime import UTC, datetime, timedelta

from core.platform.db import Conn
from core.platform.ids import new_id
from core.platform.services import Services
from core.ticks.digests import run_digests
from tests.support.api import api_client, assert_problem, create
from tests.support.builders import WEBHOOK_SECRET, make_tenant
from tests.support.records import rows

DAY1 = datetime(2027, 3, 1, tzinfo=UTC)


async def test_digests__listed_per_route_newest_first_and_paginated(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn, plan="pro")
    async with api_client(services) as client:
        form = await create(client, acme, "/v1/forms", {"name": "Contact"})
        hook = await create(
            client,
            acme,
            "/v1/destinations",
            {
                "type": "webhook",
                "name": "Hook",
                "config": {"url": "https://example.com/hook"},
                "secret": WEBHOOK_SECRET,
            },
        )
        route = await create(
            client,
            acme,
            f"/v1/forms/{form['id']}/routes",
            {"destination_id": hook["id"], "mode": "digest", "period": "daily"},
        )
        await conn.execute(
            "UPDATE routes SET updated_at = %(at)s WHERE id = %(id)s",
            {"at": DAY1, "id": route["id"]},
        )
        for day in range(3):
            await conn.execute(
                'INSERT INTO submissions (id, organization_id, form_id, status, "values",'
                " payload_hash, received_at) VALUES ('sub_' || %(n)s::text, %(org)s, %(form)s,"
                " 'accepted', '{}', '\\x00', %(at)s)",
                {
                    "n": day,
                    "org": acme.scope.organization_id,
                    "form": form["id"],
                    "at": DAY1 + timedelta(days=day, hours=5),
                },
            )
        await run_digests(services, now=DAY1 + timedelta(days=3, hours=1), budget=10)

        page = await client.get(
            "/v1/digests", params={"route": route["id"], "limit": 2}, headers=acme.headers
        )
        assert page.status_code == 200
        body = page.json()
        assert [d["period"] for d in body["data"]] == ["2027-03-03", "2027-03-02"]
        first = body["data"][0]
        assert first["route"] == route["id"] and first["count"] == 1
        assert first["delivery_status"] == "pending" and first["delivery"].startswith("dlv_")
        rest = await client.get(
            "/v1/digests",
            params={"route": route["id"], "limit": 2, "cursor": body["next_cursor"]},
            headers=acme.headers,
        )
        assert [d["period"] for d in rest.json()["data"]] == ["2027-03-01"]
        assert rest.json()["next_cursor"] is None
        other = await client.get(
            "/v1/digests", params={"route": new_id("rte")}, headers=acme.headers
        )
        assert other.json() == {"data": [], "next_cursor": None}
        bad = await client.get("/v1/digests", params={"cursor": "%%%"}, headers=acme.headers)
        assert_problem(bad, 422, "invalid_input")
    [row] = await rows(conn, "SELECT count(*) AS n FROM deliveries WHERE kind = 'digest'")
    assert row["n"] == 3
