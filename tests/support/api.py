"""The management API over ASGI: a client, request bodies, creating through it, problems."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from typing import Any

import fastapi.routing
import httpx
from fastapi import FastAPI
from starlette.testclient import TestClient

from core.http.api_app import create_api_app
from core.http.served import served_routes
from core.platform.db import Database
from core.platform.services import Services
from core.platform.settings import load_settings
from tests.support.builders import TELEGRAM_TOKEN, Tenant

WEBHOOK = {"type": "webhook", "name": "Hook", "config": {"url": "https://example.com/hook"}}
EMAIL = {"type": "email", "name": "Inbox", "config": {"to": ["owner@example.com"]}}
TELEGRAM = {
    "type": "telegram",
    "name": "Chat",
    "config": {"chat_id": "-1001234567890"},
    "secret": TELEGRAM_TOKEN,
}


def app_without_database() -> FastAPI:
    """The management app on a database it never reaches: for what it answers without one
    (its routes, its OpenAPI document)."""
    settings = load_settings(database_url="postgresql://unused@127.0.0.1:1/unused")
    return create_api_app(Services(settings=settings, db=Database(settings.require_database_url())))


@functools.cache
def _openapi_text() -> str:
    response = TestClient(app_without_database()).get("/v1/openapi.json")  # public: no key
    assert response.status_code == 200, response.text
    return response.text


def openapi_document() -> dict[str, Any]:
    """`GET /v1/openapi.json`, fetched once per test process: the document is the code's,
    the same for every database (about 2 s to build)."""
    document: dict[str, Any] = json.loads(_openapi_text())
    return document


def served_operations(app: FastAPI) -> list[tuple[str, str]]:
    """Every (method, path) the app routes to an endpoint of its own (not the docs pages)."""
    return sorted(
        (method, served.path)
        for served in served_routes(app.routes)
        if isinstance(served.route, fastapi.routing.APIRoute)
        for method in served.methods
    )


@dataclass
class Recorder:
    """Every response body the client saw, to search for secrets afterwards."""

    bodies: list[str] = field(default_factory=list)

    async def __call__(self, response: httpx.Response) -> None:
        await response.aread()
        self.bodies.append(response.text)

    def text(self) -> str:
        return "\n".join(self.bodies)


def api_client(
    services: Services, key: str | None = None, *, recorder: Recorder | None = None
) -> httpx.AsyncClient:
    """A client for the management app on ASGI (no network), sending `key` when given."""
    hooks: dict[str, list[Any]] = {"response": [recorder]} if recorder else {}
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=create_api_app(services)),
        base_url="http://test",
        headers=headers,
        event_hooks=hooks,
    )


async def create(
    client: httpx.AsyncClient, who: Tenant, path: str, body: dict[str, Any]
) -> dict[str, Any]:
    """POST `body` as `who`, expecting 201; return the created object."""
    response = await client.post(path, json=body, headers=who.headers)
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


def assert_problem(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """The response is an RFC 9457 problem with this status and code; return its body."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = response.json()
    assert body["code"] == code, body
    assert body["status"] == status
    assert {"type", "title", "detail"} <= body.keys()
    return body


def error_fields(body: dict[str, Any]) -> set[str]:
    """The fields a 422 problem names."""
    return {item["field"] for item in body.get("errors", [])}
