"""`GET /` and the thank-you page, in the local runner (one process) and the cloud's submit
function: the local runner tells a developer what it is and why a post went nowhere."""

from __future__ import annotations

import httpx

from core.http.server import combined_app
from core.platform.db import Conn
from core.platform.services import Services
from tests.support.builders import make_form, make_tenant
from tests.support.records import rows
from tests.support.submit import submit_client


def local_client(services: Services) -> httpx.AsyncClient:
    """The local runner's one app (submit, API, dashboard) over ASGI."""
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=combined_app(services), client=("127.0.0.1", 5000)),
        base_url="http://127.0.0.1:8080",
    )


async def test_home__local_runner_shows_links_and_the_oldest_forms_snippet(
    services: Services, conn: Conn
) -> None:
    tenant = await make_tenant(conn)
    form = await make_form(conn, tenant)
    await make_form(conn, tenant, name="Later")
    async with local_client(services) as client:
        page = await client.get("/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert 'href="/app"' in page.text and 'href="/v1/docs"' in page.text
    assert f"&lt;form action=&quot;http://127.0.0.1:8080/s/{form}&quot;" in page.text
    assert "Later" not in page.text
    assert "<script" not in page.text


async def test_home__cloud_submit_function_says_it_runs_and_shows_no_data(
    services: Services, conn: Conn
) -> None:
    tenant = await make_tenant(conn)
    form = await make_form(conn, tenant)
    async with submit_client(services) as client:
        page = await client.get("/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/plain")
    assert page.text == "Postbag is running\n"
    assert form not in page.text


async def test_thank_you__local_runner_tells_why_a_post_was_quarantined_and_links_its_receipt(
    services: Services, conn: Conn
) -> None:
    tenant = await make_tenant(conn)
    form = await make_form(
        conn,
        tenant,
        allowed_origins=["https://example.com"],
        redirect_url="https://example.com/thanks",
    )
    async with local_client(services) as client:
        local = await client.post(f"/s/{form}", data={"email": "a@example.com"})
    async with submit_client(services) as client:
        cloud = await client.post(f"/s/{form}", data={"email": "a@example.com"})
    stored = await rows(conn, "SELECT id, status, reason FROM submissions ORDER BY id")
    assert [(r["status"], r["reason"]) for r in stored] == [("quarantined", "origin_rejected")] * 2
    # Locally: a page saying what happened instead of a redirect to the site's thank-you.
    assert local.status_code == 200
    assert "Local runner only" in local.text and "origin_rejected" in local.text
    assert f'href="/app/submissions/{stored[0]["id"]}"' in local.text
    assert f"https://example.com/thanks?receipt={stored[0]['id']}" in local.text
    # In the cloud: exactly what an accepted post gets, so that bots learn nothing.
    assert cloud.status_code == 303
    assert cloud.headers["location"] == f"https://example.com/thanks?receipt={stored[1]['id']}"


async def test_thank_you__local_runner_adds_nothing_to_an_accepted_post_and_cloud_tells_nothing(
    services: Services, conn: Conn
) -> None:
    tenant = await make_tenant(conn)
    form = await make_form(conn, tenant)
    async with local_client(services) as client:
        accepted = await client.post(f"/s/{form}", data={"email": "a@example.com"})
        trapped = await client.post(f"/s/{form}", data={"_gotcha": "bot"})
    async with submit_client(services) as client:
        cloud_trapped = await client.post(f"/s/{form}", data={"_gotcha": "bot"})
    assert accepted.status_code == 200 and "Local runner only" not in accepted.text
    assert "spam" in trapped.text and "honeypot" in trapped.text
    assert cloud_trapped.status_code == 200
    assert "Local runner only" not in cloud_trapped.text and "honeypot" not in cloud_trapped.text
