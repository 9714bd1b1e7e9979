"""The form page's schema section over HTTP: the versions with their source, Adopt for a
suggestion, and the drift summary."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from core.http.dashboard.schemas import SHOWN_VERSIONS
from core.platform.db import Conn
from core.platform.services import Services
from tests.support.builders import Tenant, add_schema, make_form, make_tenant
from tests.support.dashboard import dashboard_client, sign_in
from tests.support.records import rows

MANUAL = {"type": "object", "required": ["email"]}
SUGGESTED = {"type": "object", "properties": {"email": {"type": "string"}}}


async def _suggest(conn: Conn, tenant: Tenant, form_id: str, schema: dict[str, Any]) -> int:
    return await add_schema(conn, tenant, form_id, schema, source="suggested")


async def _form_page(services: Services, tenant: Tenant, form_id: str) -> httpx.Response:
    """The form's page as its owner, signed in, sees it."""
    async with dashboard_client(services) as client:
        await sign_in(client, tenant.key)
        return await client.get(f"/app/forms/{form_id}")


def _version_rows(html: str) -> dict[int, str]:
    """Each listed version's table row, by version number."""
    body = html.split('<table class="schema-versions">', 1)[1].split("</table>", 1)[0]
    found = re.findall(r"<tr>\s*<td>(\d+)(.*?)</tr>", body, flags=re.S)
    return {int(version): rest for version, rest in found}


async def test_schemas__versions_are_listed_with_their_source(
    services: Services, conn: Conn
) -> None:
    tenant = await make_tenant(conn)
    form_id = await make_form(conn, tenant, schema_mode="observe")
    await add_schema(conn, tenant, form_id, MANUAL)
    await _suggest(conn, tenant, form_id, SUGGESTED)
    page = await _form_page(services, tenant, form_id)
    listed = _version_rows(page.text)
    assert list(listed) == [2, 1]  # newest first
    assert "suggested" in listed[2] and "current" not in listed[2]
    assert "Adopt" in listed[2] and "/schemas/2/adopt" in listed[2]
    assert "manual" in listed[1] and "current" in listed[1] and "Adopt" not in listed[1]
    assert "&#34;required&#34;" in listed[1]  # its JSON, under Show


async def test_schemas__a_suggestion_alone_is_not_current(services: Services, conn: Conn) -> None:
    tenant = await make_tenant(conn)
    form_id = await make_form(conn, tenant, schema_mode="observe")
    await _suggest(conn, tenant, form_id, SUGGESTED)
    page = await _form_page(services, tenant, form_id)
    listed = _version_rows(page.text)
    assert list(listed) == [1] and "current" not in listed[1]
    assert "No schema of yours yet" in page.text


async def test_schemas__adopt_appends_a_manual_copy_that_is_current(
    services: Services, conn: Conn
) -> None:
    tenant = await make_tenant(conn)
    form_id = await make_form(conn, tenant, schema_mode="observe")
    await add_schema(conn, tenant, form_id, MANUAL)
    await _suggest(conn, tenant, form_id, SUGGESTED)
    url = f"/app/forms/{form_id}/schemas/2/adopt"
    async with dashboard_client(services) as client:
        token = await sign_in(client, tenant.key)
        for data in ({}, {"csrf": "wrong"}):
            assert (await client.post(url, data=data)).status_code == 403
        assert len(await rows(conn, "SELECT 1 FROM form_schemas")) == 2
        adopted = await client.post(url, data={"csrf": token})
        assert adopted.status_code == 303
        assert adopted.headers["location"] == f"/app/forms/{form_id}#schema"
        page = await client.get(f"/app/forms/{form_id}")
        missing = await client.post(f"/app/forms/{form_id}/schemas/9/adopt", data={"csrf": token})
    versions = await rows(conn, "SELECT version, source, schema FROM form_schemas ORDER BY version")
    assert [(v["version"], v["source"]) for v in versions] == [
        (1, "manual"),
        (2, "suggested"),
        (3, "manual"),
    ]
    assert versions[2]["schema"] == SUGGESTED
    listed = _version_rows(page.text)
    assert list(listed) == [3, 2, 1]
    assert "current" in listed[3] and "current" not in listed[1]
    assert missing.status_code == 404 and "Not found" in missing.text


async def test_schemas__adopt_past_the_plan_limit_is_refused_in_words(
    services: Services, conn: Conn
) -> None:
    tenant = await make_tenant(conn)  # free: 20 versions per form
    form_id = await make_form(conn, tenant)
    for _ in range(19):
        await add_schema(conn, tenant, form_id, MANUAL)
    await _suggest(conn, tenant, form_id, SUGGESTED)
    async with dashboard_client(services) as client:
        token = await sign_in(client, tenant.key)
        refused = await client.post(f"/app/forms/{form_id}/schemas/20/adopt", data={"csrf": token})
    assert refused.status_code == 402 and "20 schema versions" in refused.text
    assert len(await rows(conn, "SELECT 1 FROM form_schemas")) == 20


async def test_schemas__the_page_shows_the_latest_versions_and_the_current_one(
    services: Services, conn: Conn
) -> None:
    tenant = await make_tenant(conn, plan="pro")
    form_id = await make_form(conn, tenant)
    await add_schema(conn, tenant, form_id, MANUAL)
    for _ in range(SHOWN_VERSIONS + 4):
        await _suggest(conn, tenant, form_id, SUGGESTED)
    page = await _form_page(services, tenant, form_id)
    listed = _version_rows(page.text)
    newest = SHOWN_VERSIONS + 5
    assert list(listed) == [*range(newest, newest - SHOWN_VERSIONS, -1), 1]
    assert "current" in listed[1]
    assert "4 earlier versions not shown" in page.text


async def test_schemas__the_drift_summary_is_shown(services: Services, conn: Conn) -> None:
    tenant = await make_tenant(conn)
    form_id = await make_form(conn, tenant, schema_mode="observe")
    await add_schema(conn, tenant, form_id, MANUAL)
    async with dashboard_client(services) as client:
        await sign_in(client, tenant.key)
        empty = await client.get(f"/app/forms/{form_id}")
        now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
        for hour, path, keyword, count in (
            (now - timedelta(hours=2), "/email", "required", 3),
            (now - timedelta(hours=1), "/email", "required", 2),
            (now - timedelta(hours=1), "/age", "type", 1),
            (now - timedelta(days=40), "/old", "enum", 9),  # past the 30 days
        ):
            await conn.execute(
                "INSERT INTO schema_drift (organization_id, form_id, hour, path, keyword, "
                "count, first_seen, last_seen) VALUES (%(org)s, %(form)s, %(hour)s, %(path)s, "
                "%(keyword)s, %(count)s, %(hour)s, %(hour)s + interval '5 minutes')",
                {
                    "org": tenant.org,
                    "form": form_id,
                    "hour": hour,
                    "path": path,
                    "keyword": keyword,
                    "count": count,
                },
            )
        page = await client.get(f"/app/forms/{form_id}")
    assert 'id="no-drift"' in empty.text and '<table class="drift">' not in empty.text
    assert 'id="no-drift"' not in page.text
    table = page.text.split('<table class="drift">', 1)[1].split("</table>", 1)[0]
    lines = re.findall(
        r"<tr>\s*<td><code>([^<]*)</code></td><td><code>([^<]*)</code></td>"
        r"<td>(\d+)</td>",
        table,
    )
    assert lines == [("/age", "type", "1"), ("/email", "required", "5")]
    first = (now - timedelta(hours=2)).strftime("%Y-%m-%d %H:%M")
    last = (now - timedelta(hours=1, minutes=-5)).strftime("%Y-%m-%d %H:%M")
    assert first in table and last in table and "/old" not in table


async def test_schemas__another_organizations_form_is_a_404_page(
    services: Services, conn: Conn
) -> None:
    tenant = await make_tenant(conn)
    form_id = await make_form(conn, tenant, schema_mode="observe")
    await _suggest(conn, tenant, form_id, SUGGESTED)
    other = await make_tenant(conn, name="Other")
    async with dashboard_client(services) as client:
        token = await sign_in(client, other.key)
        adopt = await client.post(f"/app/forms/{form_id}/schemas/1/adopt", data={"csrf": token})
        page = await client.get(f"/app/forms/{form_id}")
    assert adopt.status_code == 404 and "Not found" in adopt.text
    assert page.status_code == 404 and "suggested" not in page.text
    assert len(await rows(conn, "SELECT 1 FROM form_schemas")) == 1
