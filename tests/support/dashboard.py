"""Signing in to the dashboard over ASGI, and reading CSRF tokens out of its pages."""

from __future__ import annotations

import re

import httpx

from core.http.api_app import create_api_app
from core.owner.organizations import authenticate
from core.platform.scope import OrgScope
from core.platform.services import Services
from core.platform.vocabulary import Role
from tests.support.builders import Tenant, make_member, sign_in_link

_CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def csrf_of(html: str) -> str:
    found = _CSRF.search(html)
    assert found, "the page has no CSRF field"
    return found.group(1)


class DashboardClient(httpx.AsyncClient):
    """A client of the api app in process, knowing its services (to make members)."""

    def __init__(self, services: Services) -> None:
        super().__init__(
            transport=httpx.ASGITransport(app=create_api_app(services)),
            base_url="http://127.0.0.1:8080",
        )
        self.services = services


def dashboard_client(services: Services) -> DashboardClient:
    return DashboardClient(services)


async def sign_in(client: DashboardClient, key: str, role: Role = "owner") -> str:
    """Sign in as a new member with `role` in the organization of API key `key` (through a
    one-time sign-in link: no password hashed); return the session's CSRF token."""
    async with client.services.db.connection() as conn:
        scope: OrgScope = await authenticate(conn, key)
        member = await make_member(conn, Tenant(scope, key), role=role)
        link = await sign_in_link(conn, member)
    response = await client.get(link)
    assert response.status_code == 303, response.text
    inbox = await client.get("/app")
    assert inbox.status_code == 200, inbox.text
    return csrf_of(inbox.text)
