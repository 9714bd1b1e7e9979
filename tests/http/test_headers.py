"""Security headers: the dashboard, `/v1`, the API docs and the built-in thank-you page."""

from __future__ import annotations

import base64
import hashlib
import re

import httpx

from core.platform.db import Conn
from core.platform.services import Services
from tests.support.api import api_client
from tests.support.builders import make_form, make_tenant
from tests.support.dashboard import dashboard_client, sign_in
from tests.support.submit import submit_client


def directives(response: httpx.Response) -> dict[str, str]:
    """The response's Content-Security-Policy, directive by directive."""
    policy = response.headers["content-security-policy"]
    found = {}
    for part in policy.split(";"):
        name, _, value = part.strip().partition(" ")
        found[name] = value
    return found


def assert_hardened(response: httpx.Response, *, cacheable: bool = False) -> dict[str, str]:
    """No framing, no sniffing, no Referer, no inline script; no caching unless `cacheable`."""
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["referrer-policy"] == "no-referrer"
    assert response.headers["x-frame-options"] == "DENY"
    policy = directives(response)
    assert policy["frame-ancestors"] == "'none'"
    assert "unsafe-inline" not in response.headers["content-security-policy"]
    assert "unsafe-eval" not in response.headers["content-security-policy"]
    assert policy.get("script-src", "'self'") in ("'self'", "'none'")
    if cacheable:
        assert "no-store" not in response.headers.get("cache-control", "")
    else:
        assert response.headers["cache-control"] == "no-store"
    return policy


def assert_no_inline_script_or_style(page: str) -> None:
    assert re.search(r"<script(?![^>]*\bsrc=)", page) is None, "an inline <script>"
    assert re.search(r"<style[\s>]|<[a-z][^>]*\sstyle=", page) is None, "an inline style"
    assert re.search(r"<[a-z][^>]*\son[a-z]+=|=\"javascript:", page) is None, "an inline handler"


async def test_dashboard__pages_carry_the_headers(services: Services, conn: Conn) -> None:
    acme = await make_tenant(conn)
    form_id = await make_form(conn, acme)
    async with dashboard_client(services) as client:
        sign_in_page = await client.get("/app/sign-in")
        await sign_in(client, acme.key)
        pages = [await client.get(p) for p in ("/app", "/app/forms", f"/app/forms/{form_id}")]
        stylesheet = await client.get("/app/static/app.css")
        missing = await client.get("/app/nothing-here")
    for response in (sign_in_page, *pages, missing):
        policy = assert_hardened(response)
        assert policy["default-src"] == "'none'" and policy["style-src"] == "'self'"
        assert policy["form-action"] == "'self'"
        assert_no_inline_script_or_style(response.text)
    assert stylesheet.status_code == 200
    assert_hardened(stylesheet, cacheable=True)


async def test_v1__answers_carry_the_headers(services: Services, conn: Conn) -> None:
    acme = await make_tenant(conn)
    async with api_client(services) as client:
        answers = [
            await client.get("/v1/forms", headers=acme.headers),
            await client.get("/v1/forms"),
            await client.get("/v1/openapi.json"),
            await client.get("/health"),
        ]
    assert [a.status_code for a in answers[:3]] == [200, 401, 200]
    for answer in answers:
        policy = assert_hardened(answer)
        assert policy["default-src"] == "'none'" and "sandbox" in policy


async def test_v1_docs__swagger_ui_from_the_package_under_a_strict_policy(
    services: Services,
) -> None:
    async with api_client(services) as client:
        page = await client.get("/v1/docs")
        sources = re.findall(r'(?:src|href)="([^"]+)"', page.text)
        assets = {source: await client.get(source) for source in sources}
    policy = assert_hardened(page)
    assert policy["script-src"] == "'self'" and policy["style-src"] == "'self'"
    assert_no_inline_script_or_style(page.text)
    assert sources and all(source.startswith("/v1/docs/") for source in sources), sources
    for source, asset in assets.items():
        assert asset.status_code == 200, source
        assert asset.headers["content-type"].startswith(("text/javascript", "text/css")), source
    bundle = next(a for s, a in assets.items() if s.endswith("swagger-ui-bundle.js"))
    assert len(bundle.content) > 100_000  # the real bundle, not a stub
    assert_hardened(bundle, cacheable=True)


async def test_thank_you_page__strict_policy_with_its_style_hashed(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn)
    form_id = await make_form(conn, acme)
    async with submit_client(services) as client:
        page = await client.post(
            f"/s/{form_id}",
            data={"email": "ada@example.com"},
            headers={"Referer": "https://shop.example/contact?x=<b>"},
        )
    assert page.status_code == 200, page.text
    policy = assert_hardened(page)
    assert policy["default-src"] == "'none'"
    [style] = re.findall(r"<style>(.*?)</style>", page.text, flags=re.S)
    digest = base64.b64encode(hashlib.sha256(style.encode()).digest()).decode()
    assert policy["style-src"] == f"'sha256-{digest}'"
    assert "<script" not in page.text and "javascript:" not in page.text
    assert 'href="https://shop.example/contact?x=&lt;b&gt;"' in page.text
