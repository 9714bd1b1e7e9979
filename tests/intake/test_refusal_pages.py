"""Refusals of a plain HTML form post: a small page with the message and a link back, with the
same status; JSON clients keep problem+json. One case runs in a real browser."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from core.platform.db import Conn, connect
from core.platform.ids import new_id
from core.platform.services import Services
from core.platform.settings import load_settings
from tests.support.api import assert_problem
from tests.support.builders import make_form, make_tenant, setup_form
from tests.support.files import elf
from tests.support.records import rows
from tests.support.submit import submit_client

SITE = "https://shop.example"
BROWSER = {
    "Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
    "Referer": f"{SITE}/contact?step=2",
}
URLENCODED = {"Content-Type": "application/x-www-form-urlencoded"}


def _back(page: str) -> str:
    found = re.search(r'<a href="([^"]*)">Go back to the form</a>', page)
    assert found is not None, page
    return found.group(1).replace("&amp;", "&")


def _assert_page(response: httpx.Response, status: int, heading: str) -> str:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    assert f"<h1>{heading}</h1>" in response.text
    return response.text


async def test_refusal_page__attachment_errors_list_each_field(
    services: Services, conn: Conn
) -> None:
    rules = {"cv": {"types": [".pdf"]}, "photo": {"types": [".png"]}}
    _, form = await setup_form(conn, file_fields=rules, allowed_origins=[SITE])
    files = {"cv": ("cv.pdf", elf(), "application/pdf"), "photo": ("p.png", b"", "image/png")}
    async with submit_client(services) as client:
        page = await client.post(f"/s/{form}", files=files, data={"a": "1"}, headers=BROWSER)
        problem = await client.post(
            f"/s/{form}", files=files, data={"a": "1"}, headers={"Accept": "application/json"}
        )
    errors = assert_problem(problem, 422, "invalid_attachment")["errors"]
    assert {e["field"] for e in errors} == {"cv", "photo"}
    text = _assert_page(page, 422, "Please check the form")
    for error in errors:
        assert f"<li><strong>{error['field']}</strong>: {error['message']}</li>" in text
    assert _back(text) == f"{SITE}/contact?step=2"
    assert await rows(conn, "SELECT id FROM submissions") == []


async def test_refusal_page__body_limits_closed_and_unknown_forms(
    services: Services, conn: Conn
) -> None:
    tenant, form = await setup_form(conn, allowed_origins=[SITE])
    closed = await make_form(conn, tenant, accepting=False, allowed_origins=[SITE])
    async with submit_client(services) as client:
        too_large = await client.post(
            f"/s/{form}", content=b"a=" + b"x" * 300_000, headers={**BROWSER, **URLENCODED}
        )
        unsupported = await client.post(
            f"/s/{form}", content=b"a=1", headers={**BROWSER, "Content-Type": "text/plain"}
        )
        closed_page = await client.post(
            f"/s/{closed}", content=b"a=1", headers={**BROWSER, **URLENCODED}
        )
        unknown = await client.post(
            "/s/frm_01jexampleexampleexample00",
            content=b"a=1",
            headers={**BROWSER, **URLENCODED},
        )
        elsewhere = await client.post(
            f"/s/{closed}",
            content=b"a=1",
            headers={**BROWSER, **URLENCODED, "Referer": "https://evil.example/x"},
        )
        # A fetch() client (Accept */*) and a JSON body keep problem+json.
        fetched = await client.post(f"/s/{closed}", content=b"a=1", headers=URLENCODED)
        json_body = await client.post(f"/s/{closed}", json={"a": 1}, headers=BROWSER)
    assert _back(_assert_page(too_large, 413, "Too much to send")) == f"{SITE}/contact?step=2"
    _assert_page(unsupported, 415, "This form cannot be sent")
    text = _assert_page(closed_page, 403, "This form is closed")
    assert "This form is not taking submissions." in text
    assert _back(text) == f"{SITE}/contact?step=2"
    # An unknown form has no allowed origins to check the Referer against.
    assert _back(_assert_page(unknown, 404, "Form not found")) == "javascript:history.back()"
    assert _back(_assert_page(elsewhere, 403, "This form is closed")) == (
        "javascript:history.back()"
    )
    assert_problem(fetched, 403, "form_closed")
    assert_problem(json_body, 403, "form_closed")
    assert await rows(conn, "SELECT id FROM submissions") == []


async def test_refusal_page__database_unreachable_is_a_503_page_with_retry_after(
    tmp_path: Path,
) -> None:
    settings = load_settings(
        database_url="postgresql://postgres@127.0.0.1:1/postgres",
        secret_key="x" * 40,
        db_connect_timeout=1,
        storage_url=f"file://{tmp_path}",
    )
    services = Services.from_settings(settings)
    try:
        async with submit_client(services) as client:
            response = await client.post(
                f"/s/{new_id('frm')}",
                content=b"a=1",
                headers={**BROWSER, **URLENCODED},
            )
    finally:
        await services.db.close()
    _assert_page(response, 503, "Please try again in a moment")
    assert response.headers["retry-after"] == "5"


@pytest.mark.slow
def test_refusal_page__a_browser_posting_to_a_closed_form_reads_it_and_goes_back(
    db_url: str, tmp_path: Path, smtp_server: tuple[str, list[Any]]
) -> None:
    from tests.http.dashboard.test_browser import (
        CHROMIUM_ARGS,
        _chromium,
        _smtp,
        other_origin,
        postbag,
        sync_api,
    )

    executable = _chromium()
    with (
        postbag(db_url, tmp_path, **_smtp(smtp_server[0])) as app,
        other_origin() as site,
    ):

        async def closed_form() -> str:
            conn = await connect(db_url)
            try:
                tenant = await make_tenant(conn)
                return await make_form(conn, tenant, accepting=False, allowed_origins=[site.url])
            finally:
                await conn.close()

        site.action = f"{app.url}/s/{asyncio.run(closed_form())}"
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
            page = browser.new_page()
            expect = sync_api.expect
            page.goto(site.url + "/contact")
            page.get_by_label("Email").fill("ann@example.com")
            page.get_by_label("Message").fill("Hello")
            with page.expect_response(lambda r: "/s/" in r.url) as answered:
                page.get_by_role("button", name="Send").click()
            assert answered.value.status == 403
            expect(page.get_by_role("heading", name="This form is closed")).to_be_visible()
            expect(page.get_by_role("alert")).to_have_text("This form is not taking submissions.")
            page.get_by_role("link", name="Go back to the form").click()
            expect(page.get_by_role("heading", name="Contact the bike shop")).to_be_visible()
            # Chromium sends another site only the origin as Referer (its default policy).
            assert page.url == site.url + "/"
            browser.close()
