"""Signing in to the dashboard over ASGI, and reading CSRF tokens out of its pages."""

from __future__ import annotations

import re

import httpx

from core.http.api_app import create_api_app
from core.platform.services import Services

_CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def csrf_of(html: str) -> str:
    found = _CSRF.search(html)
    assert found, "the page has no CSRF field"
    return found.group(1)


def dashboard_client(services: Services) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=create_api_app(services)),
        base_url="http://127.0.0.1:8080",
    )


async def sign_in(client: httpx.AsyncClient, key: str) -> str:
    """Sign in with `key`; return the session's CSRF token."""
    page = await client.get("/app/sign-in")
    response = await client.post("/app/sign-in", data={"csrf": csrf_of(page.text), "api_key": key})
    assert response.status_code == 303, response.text
    inbox = await client.get("/app")
    assert inbox.status_code == 200, inbox.text
    return csrf_of(inbox.text)
