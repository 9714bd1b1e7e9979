"""Forms, destinations and routes inserted with plain SQL, and clients for the two apps."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qsl

import httpx

from core.http.api_app import create_api_app
from core.http.submit_app import create_submit_app
from core.platform.db import Conn
from core.platform.ids import new_id
from core.platform.scope import OrgScope
from core.platform.services import Services
from tests.conftest import make_org

WEBHOOK_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


async def create_form(conn: Conn, scope: OrgScope, **columns: Any) -> str:
    """A form with default settings, overridden by `columns`."""
    form_id = columns.pop("id", None) or new_id("frm")
    row: dict[str, Any] = {
        "id": form_id,
        "organization_id": scope.organization_id,
        "name": "Contact",
    }
    row.update(columns)
    for key in ("labels", "file_fields", "ack_email"):
        if key in row and not isinstance(row[key], str) and row[key] is not None:
            row[key] = json.dumps(row[key])
    names = ", ".join(f'"{k}"' for k in row)
    placeholders = ", ".join(f"%({k})s" for k in row)
    await conn.execute(f"INSERT INTO forms ({names}) VALUES ({placeholders})", row)
    return form_id


async def add_schema(conn: Conn, scope: OrgScope, form_id: str, schema: dict[str, Any]) -> int:
    cur = await conn.execute(
        "INSERT INTO form_schemas (organization_id, form_id, version, schema) "
        "SELECT %(org)s, %(form)s, coalesce(max(version), 0) + 1, %(schema)s "
        "FROM form_schemas WHERE form_id = %(form)s RETURNING version",
        {"org": scope.organization_id, "form": form_id, "schema": json.dumps(schema)},
    )
    row = await cur.fetchone()
    assert row is not None
    return int(row["version"])


async def create_destination(
    conn: Conn,
    scope: OrgScope,
    *,
    type: str = "webhook",
    config: dict[str, Any] | None = None,
    secrets: tuple[str, ...] = (WEBHOOK_SECRET,),
    **columns: Any,
) -> str:
    """A destination (webhook by default) with its secret versions 1..n."""
    destination_id = new_id("dst")
    if config is None:
        config = {"url": "https://hooks.example.com/postbag?token=abc"}
    await conn.execute(
        "INSERT INTO destinations (id, organization_id, type, name, config, enabled, deleted_at) "
        "VALUES (%(id)s, %(org)s, %(type)s, 'Hook', %(config)s, %(enabled)s, %(deleted_at)s)",
        {
            "id": destination_id,
            "org": scope.organization_id,
            "type": type,
            "config": json.dumps(config),
            "enabled": columns.get("enabled", True),
            "deleted_at": columns.get("deleted_at"),
        },
    )
    for version, secret in enumerate(secrets, start=1):
        await conn.execute(
            "INSERT INTO destination_secrets (organization_id, destination_id, version, secret) "
            "VALUES (%(org)s, %(dst)s, %(version)s, %(secret)s)",
            {
                "org": scope.organization_id,
                "dst": destination_id,
                "version": version,
                "secret": secret,
            },
        )
    return destination_id


async def create_route(
    conn: Conn, scope: OrgScope, form_id: str, destination_id: str, **columns: Any
) -> str:
    route_id = new_id("rte")
    row: dict[str, Any] = {
        "id": route_id,
        "organization_id": scope.organization_id,
        "form_id": form_id,
        "destination_id": destination_id,
    }
    row.update(columns)
    if "template" in row and row["template"] is not None:
        row["template"] = json.dumps(row["template"])
    names = ", ".join(row)
    placeholders = ", ".join(f"%({k})s" for k in row)
    await conn.execute(f"INSERT INTO routes ({names}) VALUES ({placeholders})", row)
    return route_id


async def setup_form(
    conn: Conn, *, plan: str = "free", routes: int = 1, **form_columns: Any
) -> tuple[OrgScope, str, str]:
    """An organization with an API key, a form and `routes` webhook routes to it."""
    scope, key = await make_org(conn, plan=plan)
    form_id = await create_form(conn, scope, **form_columns)
    for _ in range(routes):
        destination = await create_destination(conn, scope)
        await create_route(conn, scope, form_id, destination)
    return scope, key, form_id


def submit_client(
    services: Services, *, client: tuple[str, int] = ("198.51.100.7", 4000)
) -> httpx.AsyncClient:
    app = create_submit_app(services)
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app, client=client), base_url="http://postbag.test"
    )


def api_client(services: Services, key: str) -> httpx.AsyncClient:
    app = create_api_app(services)
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://postbag.test",
        headers={"Authorization": f"Bearer {key}"},
    )


async def chunks(data: bytes, size: int = 65536) -> AsyncIterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


class FakeTurnstile:
    """A loopback HTTP peer answering siteverify with a set body, status or delay."""

    def __init__(self) -> None:
        self.body: dict[str, Any] = {"success": True}
        self.status = 200
        self.delay = 0.0
        self.requests: list[dict[str, str]] = []
        self._server: asyncio.Server | None = None
        self.url = ""

    async def __aenter__(self) -> FakeTurnstile:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}/siteverify"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.decode("latin-1").split("\r\n"):
                if line.lower().startswith("content-length:"):
                    length = int(line.split(":", 1)[1])
            form = dict(parse_qsl((await reader.readexactly(length)).decode()))
            self.requests.append(form)
            if self.delay:
                await asyncio.sleep(self.delay)
            body = json.dumps(self.body).encode()
            writer.write(
                f"HTTP/1.1 {self.status} X\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                + body
            )
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
