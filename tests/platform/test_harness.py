"""The harness's recycled databases: what one test left behind, the next does not see."""

from __future__ import annotations

import psycopg
import pytest

from core.platform.db import connect
from tests.support.builders import make_form, make_route_to, make_tenant
from tests.support.databases import Clones, database_url, snapshot


async def _leave_traces(url: str) -> None:
    conn = await connect(url)
    try:
        tenant = await make_tenant(conn)
        form = await make_form(conn, tenant)
        await make_route_to(conn, tenant, form)
        await conn.execute("UPDATE outbox_claim_cursor SET visited_org = %s", (tenant.org,))
        await conn.execute("UPDATE destination_types SET max_attempts = 99 WHERE name = 'webhook'")
        await conn.execute(
            "INSERT INTO events (organization_id, type) VALUES (%s, 'form.created')",
            (tenant.org,),
        )
        await conn.execute("ANALYZE")
    finally:
        await conn.close()


async def test_recycled__rows_sequences_and_statistics_are_the_templates_again(
    admin_url: str, template_name: str, request: pytest.FixtureRequest
) -> None:
    template = snapshot(database_url(admin_url, template_name))
    with Clones(admin_url, template_name, ahead=1) as clones:
        used = clones.take()
        await _leave_traces(database_url(admin_url, used))
        assert snapshot(database_url(admin_url, used)) != template
        left_open = psycopg.connect(database_url(admin_url, used), autocommit=True)
        request.addfinalizer(left_open.close)

        clones.give_back(used)
        recycled = clones.take()

        assert recycled != used
        assert snapshot(database_url(admin_url, recycled)) == template
        with pytest.raises(psycopg.OperationalError):
            left_open.execute("SELECT 1")
        with pytest.raises(psycopg.OperationalError, match="does not exist"):
            psycopg.connect(database_url(admin_url, used))
        clones.give_back(recycled)


async def test_recycled__a_changed_schema_is_replaced_by_a_fresh_clone(
    admin_url: str, template_name: str
) -> None:
    template = snapshot(database_url(admin_url, template_name))
    with Clones(admin_url, template_name, ahead=1) as clones:
        used = clones.take()
        conn = await connect(database_url(admin_url, used))
        await conn.execute("ALTER TABLE forms DISABLE TRIGGER forms_revised")
        await conn.close()

        clones.give_back(used)
        replaced = clones.take()

        assert snapshot(database_url(admin_url, replaced)) == template
        clones.give_back(replaced)
