"""Search over submissions' values: `GET /v1/submissions?q=` and the inbox's search box, found
only while the values are readable."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import psycopg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg.rows import dict_row

from core.http.api_app import create_api_app
from core.platform.db import Conn
from core.platform.services import Services
from tests.support.api import api_client, assert_problem
from tests.support.builders import Tenant, make_form, make_submission, make_tenant
from tests.support.dashboard import dashboard_client, sign_in
from tests.support.fuzzing import served, tenant_with_form
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
    assert await _found(services, acme, "mombasa") == []


async def test_search__finds_what_people_type_prefixes_and_parts_of_values(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn)
    form = await make_form(conn, acme)
    ada = await _post(services, form, {"email": "ada@example.com", "message": "Hello"})
    bob = await _post(services, form, {"email": "bob@example.net", "message": "Two Sofas"})
    cy = await _post(services, form, {"email": "cy@example.org", "message": "A sofabed, 100%"})
    rate = await _post(services, form, {"email": "dee@example.org", "message": "a 1000 rate"})
    assert await _found(services, acme, "ada") == [ada]
    assert await _found(services, acme, "ADA@EXAMPLE") == [ada]
    assert await _found(services, acme, "example.net") == [bob]
    assert await _found(services, acme, "sofa") == [cy, bob]
    assert await _found(services, acme, "sofa -example.net") == [cy]
    assert await _found(services, acme, "example sofa") == [cy, bob]
    # `%` and `_` are what the visitor typed, never wildcards.
    assert await _found(services, acme, "100%") == [cy]
    assert await _found(services, acme, "1000_rate") == []
    assert await _found(services, acme, '"1000 rate"') == [rate]
    assert await _found(services, acme, '"a sofabed"') == [cy]
    assert await _found(services, acme, "example.org") == [rate, cy]


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


def _word(n: int) -> str:
    return "".join(chr(0x20000 + 3 * n + k) for k in range(3))


async def test_search__the_largest_post_of_distinct_words_is_stored_and_found(
    services: Services, conn: Conn
) -> None:
    """20,000 distinct words of three four-byte letters (about what a 256 KB body holds)
    make no post fail for its index entries; past the first 10,000 characters of the values
    nothing is found."""
    acme = await make_tenant(conn)
    form = await make_form(conn, acme)
    receipt = await _post(services, form, {"m": " ".join(_word(n) for n in range(20_000))})
    assert await _found(services, acme, _word(1_000)) == [receipt]
    assert await _found(services, acme, _word(19_999)) == []


async def test_search__too_long_a_search_is_a_clear_422(services: Services, conn: Conn) -> None:
    acme = await make_tenant(conn)
    async with api_client(services, acme.key) as api:
        answer = await api.get("/v1/submissions", params={"q": "x" * 201})
    assert answer.status_code == 422
    assert answer.headers["content-type"].startswith("application/problem+json")


async def test_search__a_search_past_its_bounds_is_a_422_naming_q(
    services: Services, conn: Conn
) -> None:
    """Nine terms, or no term to find with three letters or digits in a row (the trigram
    index narrows nothing shorter), are refused before the database."""
    acme = await make_tenant(conn)
    async with api_client(services, acme.key) as api:
        many = await api.get("/v1/submissions", params={"q": " ".join(["word"] * 9)})
        short = await api.get("/v1/submissions", params={"q": "ab 12 -zanzibar"})
        dots = await api.get("/v1/submissions", params={"q": "..."})
        fine = await api.get("/v1/submissions", params={"q": "ab 123"})
    assert "at most 8" in assert_problem(many, 422, "invalid_search")["errors"][0]["message"]
    for answer in (short, dots):
        problem = assert_problem(answer, 422, "invalid_search")
        assert problem["errors"] == [
            {"field": "q", "message": "name a word to find with at least 3 letters or digits"}
        ]
    assert fine.status_code == 200


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


async def test_search__fifty_dashes_are_a_422_invalid_search_not_a_500(
    services: Services, conn: Conn
) -> None:
    """Fifty dashes exclude one term and name none to find: the API answers `422
    invalid_search`, the inbox a 422 page (as for a NUL, which the API refuses for any query
    parameter); a refused search is not recorded."""
    acme = await make_tenant(conn)
    form = await make_form(conn, acme)
    await _post(services, form, {"message": "Ferry to Zanzibar"})
    async with api_client(services, acme.key) as api:
        answer = await api.get("/v1/submissions", params={"q": "-" * 50})
        thirty = await api.get("/v1/submissions", params={"q": "zanzibar " + "-" * 30})
        assert thirty.status_code == 200
    problem = assert_problem(answer, 422, "invalid_search")
    assert [e["field"] for e in problem["errors"]] == ["q"]
    async with dashboard_client(services) as client:
        await sign_in(client, acme.key)
        page = await client.get("/app", params={"q": "-" * 50})
        nul = await client.get("/app", params={"q": "a\x00b"})
    assert page.status_code == 422
    assert "name a word to find" in page.text
    assert (nul.status_code, "NUL" in nul.text) == (422, True)
    # Only the 30 dashes (a search that answered) left a row.
    recorded = await rows(
        conn,
        "SELECT action FROM audit_log WHERE organization_id = %(o)s"
        " AND action <> 'member.signed_in'",
        o=acme.org,
    )
    assert recorded == [{"action": "submission.searched"}]


async def test_search__each_search_is_recorded_with_its_form_never_its_text(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn)
    form = await make_form(conn, acme)
    await _post(services, form, {"message": "Ferry to Zanzibar"})
    async with api_client(services, acme.key) as api:
        assert await _found(services, acme, "zanzibar")
        by_form = await api.get("/v1/submissions", params={"q": "ferry", "form": form})
        assert by_form.status_code == 200
        # A list without `q` reads no values: no row.
        assert (await api.get("/v1/submissions")).status_code == 200
    async with dashboard_client(services) as client:
        await sign_in(client, acme.key)
        assert (await client.get("/app", params={"q": "friday"})).status_code == 200
        assert (await client.get("/app")).status_code == 200
    trail = await rows(
        conn,
        "SELECT action, subject, via, actor_kind FROM audit_log"
        " WHERE organization_id = %(org)s AND action LIKE 'submission.%%' ORDER BY seq",
        org=acme.org,
    )
    assert trail == [
        {"action": "submission.searched", "subject": acme.org, "via": "api", "actor_kind": "key"},
        {"action": "submission.searched", "subject": form, "via": "api", "actor_kind": "key"},
        {
            "action": "submission.searched",
            "subject": acme.org,
            "via": "dashboard",
            "actor_kind": "member",
        },
    ]
    stored = repr(await rows(conn, "SELECT * FROM audit_log"))
    assert "zanzibar" not in stored and "ferry" not in stored and "friday" not in stored


# Any text, with the web-search syntax's operators and PostgreSQL's tsquery characters
# often; lone surrogates cannot travel in a URL.
_OPERATORS = ["-", "-" * 10, '"', " or ", " ", "!", "&", "|", "(", ")", ":*", "<->", "\\"]
_SEARCH_TEXT = st.lists(
    st.characters(blacklist_categories=("Cs",)) | st.sampled_from(_OPERATORS), max_size=120
).map("".join)


def _stored_submission(db_url: str, tenant: Tenant, form: str) -> None:
    """One submission with values: with none, PostgreSQL never parses the search."""

    async def make() -> None:
        async with await psycopg.AsyncConnection.connect(
            db_url, autocommit=True, row_factory=dict_row
        ) as conn:
            await make_submission(conn, tenant, form, {"message": "Ferry to Zanzibar"})

    asyncio.run(make())


def test_search__any_text_is_a_result_or_a_422(db_url: str, tmp_path: Path) -> None:
    tenant, form = tenant_with_form(db_url)
    _stored_submission(db_url, tenant, form)
    seen: dict[int, int] = {}
    with (
        served(db_url, tmp_path, create_api_app) as base,
        httpx.Client(base_url=base, timeout=30, headers=tenant.headers) as client,
    ):

        @settings(
            max_examples=200,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(q=_SEARCH_TEXT)
        def search(q: str) -> None:
            answer = client.get("/v1/submissions", params={"q": q, "form": form})
            seen[answer.status_code] = seen.get(answer.status_code, 0) + 1
            assert answer.status_code in (200, 422), (q, answer.status_code, answer.text)
            if answer.status_code == 422:
                codes = ("invalid_search", "invalid_input", "unstorable_value")
                assert answer.json()["code"] in codes

        search()
        fifty = client.get("/v1/submissions", params={"q": "-" * 50})
    assert fifty.status_code == 422
    assert sum(seen.values()) >= 200
