"""The management API and the dashboard's sign-in through PgBouncer in transaction mode:
row-level security's settings hold within each transaction, whatever server connection
it lands on."""

from __future__ import annotations

import asyncio
from collections import Counter

from core.platform.db import Conn
from core.platform.services import Services
from tests.support.api import api_client, assert_problem, create
from tests.support.builders import make_tenant
from tests.support.dashboard import dashboard_client, sign_in


async def test_v1__forms_and_routes_through_the_pooler_each_organization_sees_its_own(
    pooled: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn, "Acme", plan="pro")
    other = await make_tenant(conn, "Other", plan="pro")
    async with api_client(pooled) as client:
        forms = {
            who.org: [
                (await create(client, who, "/v1/forms", {"name": f"{who.org} {n}"}))["id"]
                for n in range(3)
            ]
            for who in (acme, other)
        }
        hook = await create(
            client,
            acme,
            "/v1/destinations",
            {"type": "webhook", "name": "Hook", "config": {"url": "https://example.com/h"}},
        )
        await create(
            client, acme, f"/v1/forms/{forms[acme.org][0]}/routes", {"destination_id": hook["id"]}
        )

        async def listed(who: object) -> list[str]:
            answer = await client.get("/v1/forms", headers=who.headers)  # type: ignore[attr-defined]
            assert answer.status_code == 200, answer.text
            return sorted(form["id"] for form in answer.json()["data"])

        # Many reads at once, so transactions hop between PgBouncer's two server connections.
        seen = await asyncio.gather(*(listed(who) for _ in range(10) for who in (acme, other)))
        assert Counter(tuple(ids) for ids in seen) == {
            tuple(sorted(forms[acme.org])): 10,
            tuple(sorted(forms[other.org])): 10,
        }
        foreign = await client.get(f"/v1/forms/{forms[acme.org][0]}", headers=other.headers)
        assert_problem(foreign, 404, "not_found")


async def test_dashboard__sign_in_through_the_pooler(pooled: Services, conn: Conn) -> None:
    acme = await make_tenant(conn, "Acme", plan="pro")
    async with dashboard_client(pooled) as client:
        await sign_in(client, acme.key)
        pages = await asyncio.gather(*(client.get("/app") for _ in range(8)))
    assert {page.status_code for page in pages} == {200}
    assert all("Acme" in page.text for page in pages)
