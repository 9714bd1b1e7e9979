"""Search over submissions' values: `GET /v1/submissions?q=` and the inbox's search box, found
only while the values are readable."""

from __future__ import annotations

import json
from typing import Any

from core.platform.db import Conn
from core.platform.services import Services
from tests.support.api import api_client
from tests.support.builders import Tenant, make_form, make_tenant
from tests.support.dashboard import dashboard_client, sign_in
from tests.support.records import rows
from tests.support.submit import submit_client

JSON = {"Content-Type": "application/json", "Accept": "application/json"}


async def _post(services: Services, form: str, values: dict[str, Any]) -> str:
    async with submit_client(services) as client:
        posted = await client.post(
            f"/s/{form}", content=json.dumps(values, ensure_ascii=False).encode(), headers=JSON
        )
    assert posted.status_code == 201, posted.text
    return str(posted.json()["receipt"])


async def _found(services: Services, tenant: Tenant, q: str) -> list[str]:
    async with api_client(services, tenant.key) as api:
        answer = await api.get("/v1/submissions", params={"q": q})
    assert answer.status_code == 200, answer.text
    return [item["id"] for item in answer.json()["data"]]


async def test_search__finds_words_in_values_of_its_own_organization_only(
    services: Services, conn: Conn
) -> None:
    acme, other = await make_tenant(conn, "Acme"), await make_tenant(conn, "Other")
    form, elsewhere = await make_form(conn, acme), await make_form(conn, other)
    boat = await _post(services, form, {"message": "Ferry to Zanzibar on Friday"})
    plane = await _post(services, form, {"message": "Flight to Nairobi", "note": "ZANZIBAR later"})
    await _post(services, form, {"message": "Nothing to see"})
    await _post(services, elsewhere, {"message": "Zanzibar too"})
    assert await _found(services, acme, "zanzibar") == [plane, boat]
    assert await _found(services, acme, '"to zanzibar"') == [boat]
    assert await _found(services, acme, "zanzibar -nairobi") == [boat]
    assert await _found(services, acme, "ferry or flight") == [plane, boat]
    assert await _found(services, acme, "mombasa") == []


async def test_search__erased_and_expired_values_are_not_found(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn)
    form = await make_form(conn, acme)
    erased = await _post(services, form, {"message": "Secret plan alpha"})
    expired = await _post(services, form, {"message": "Secret plan beta"})
    kept = await _post(services, form, {"message": "Secret plan gamma"})
    assert await _found(services, acme, "secret plan") == [kept, expired, erased]
    async with api_client(services, acme.key) as api:
        assert (await api.post(f"/v1/submissions/{erased}/erase")).status_code == 200
    # Past retention but not yet cleaned up by the retention tick: unreadable, not found.
    await conn.execute(
        "UPDATE submissions SET received_at = now() - interval '2 days',"
        " erase_at = now() - interval '1 minute' WHERE id = %(id)s",
        {"id": expired},
    )
    assert await _found(services, acme, "secret plan") == [kept]
    [row] = await rows(conn, "SELECT search FROM submissions WHERE id = %(id)s", id=erased)
    assert row["search"] is None


async def test_search__the_largest_post_of_distinct_words_is_stored_and_found(
    services: Services, conn: Conn
) -> None:
    """50,000 distinct four-byte words (the most a 256 KB body holds) make no post fail for
    its words; words past the first 10,000 characters of the values are not indexed."""
    acme = await make_tenant(conn)
    form = await make_form(conn, acme)
    words = " ".join(chr(0x20000 + n) for n in range(50_000))
    receipt = await _post(services, form, {"m": words})
    assert await _found(services, acme, chr(0x20000 + 4_000)) == [receipt]
    assert await _found(services, acme, chr(0x20000 + 49_999)) == []


async def test_search__too_long_a_search_is_a_clear_422(services: Services, conn: Conn) -> None:
    acme = await make_tenant(conn)
    async with api_client(services, acme.key) as api:
        answer = await api.get("/v1/submissions", params={"q": "x" * 201})
    assert answer.status_code == 422
    assert answer.headers["content-type"].startswith("application/problem+json")


async def test_inbox__search_box_csv_button_and_failures_that_stand_out(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn)
    form = await make_form(conn, acme)
    found = await _post(services, form, {"message": "Quote for 40 chairs"})
    missed = await _post(services, form, {"message": "Hello"})
    await conn.execute(
        "INSERT INTO deliveries (id, organization_id, kind, submission_id, channel, status,"
        " reason, max_attempts, target) VALUES ('dlv_dead1', %(org)s,"
        " 'acknowledgement', %(sub)s, 'email', 'dead', 'attempts_exhausted', 8,"
        ' \'{"to": ["a@example.com"]}\')',
        {"org": acme.org, "sub": missed},
    )
    async with dashboard_client(services) as client:
        await sign_in(client, acme.key)
        searched = (await client.get("/app", params={"q": "chairs"})).text
        listing = (await client.get("/app", params={"form": form})).text
        csv = await client.get(f"/app/export.csv?form={form}")
        everything = (await client.get("/app")).text
    assert found in searched and missed not in searched
    assert 'value="chairs"' in searched
    assert f'href="/app/export.csv?form={form}"' in listing
    assert "Download CSV" not in everything
    assert csv.status_code == 200 and csv.headers["content-type"].startswith("text/csv")
    assert "Quote for 40 chairs" in csv.text
    dead_row = everything.split(missed, 1)[0].rsplit("<tr", 1)[1]
    assert 'class="trouble dead"' in dead_row
    assert "Not delivered" in everything.split(missed, 1)[1].split("</tr>", 1)[0]
    fine_row = everything.split(found, 1)[0].rsplit("<tr", 1)[1]
    assert "trouble" not in fine_row
