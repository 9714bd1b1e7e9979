"""Body limits of the api app (`/v1`, the dashboard): refused while streaming, before any
parsing or key check, with nothing read past the limit."""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import uvicorn

from core.http.server import combined_app
from core.platform.db import Conn
from core.platform.services import Services
from tests.support.api import api_client, assert_problem
from tests.support.builders import make_form, make_tenant
from tests.support.dashboard import csrf_of, dashboard_client, sign_in
from tests.support.peers import closed_port
from tests.support.settings import built_services

CHUNK = 64 * 1024
MIB = 1024 * 1024


@dataclass
class Stream:
    """A request body produced chunk by chunk, counting what the server pulled."""

    total: int
    head: bytes = b""
    pulled: int = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        self.pulled = len(self.head)
        yield self.head
        while self.pulled < self.total:
            self.pulled += CHUNK
            yield b"x" * CHUNK


async def test_v1__oversized_unauthenticated_body_is_413_before_the_key_check(
    services: Services,
) -> None:
    body = Stream(total=16 * MIB, head=b'{"schema": {"description": "')
    async with api_client(services) as client:
        response = await client.post(
            "/v1/forms/frm_x/schemas",
            content=body,
            headers={"Content-Type": "application/json", "Authorization": "Bearer pb_wrong"},
        )
    assert_problem(response, 413, "payload_too_large")
    assert body.pulled <= MIB + CHUNK, f"read {body.pulled} bytes of a {body.total}-byte body"


async def test_v1__declared_length_over_the_limit_is_refused_unread(services: Services) -> None:
    body = Stream(total=2 * MIB)
    async with api_client(services) as client:
        response = await client.post(
            "/v1/forms",
            content=body,
            headers={"Content-Type": "application/json", "Content-Length": str(2 * MIB)},
        )
    assert_problem(response, 413, "payload_too_large")
    assert body.pulled == 0


async def test_v1__a_body_within_the_limit_still_reaches_the_endpoint(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn)
    name = "Contact"
    async with api_client(services, acme.key) as client:
        response = await client.post("/v1/forms", json={"name": name, "labels": {"a": "x" * 200}})
    assert response.status_code == 201, response.text


@pytest.mark.parametrize("path", ["/app/sign-in", "/app/forgot", "/app/invitations/x"])
async def test_sign_in__big_multipart_is_413_without_being_read(
    services: Services, path: str
) -> None:
    head = (
        b'--XyZ\r\nContent-Disposition: form-data; name="api_key"; filename="k.txt"\r\n'
        b"Content-Type: text/plain\r\n\r\n"
    )
    body = Stream(total=64 * MIB, head=head)
    async with dashboard_client(services) as client:
        response = await client.post(
            path,
            content=body,
            headers={"Content-Type": "multipart/form-data; boundary=XyZ"},
        )
    assert_problem(response, 413, "payload_too_large")
    assert body.pulled <= 16 * 1024 + CHUNK, f"read {body.pulled} bytes"


async def test_dashboard_post__over_the_limit_is_413(services: Services, conn: Conn) -> None:
    acme = await make_tenant(conn)
    form_id = await make_form(conn, acme)
    async with dashboard_client(services) as client:
        csrf = await sign_in(client, acme.key)
        page = await client.get(f"/app/forms/{form_id}")
        assert csrf_of(page.text) == csrf
        response = await client.post(
            f"/app/forms/{form_id}",
            data={"csrf": csrf, "name": "Contact", "labels": "x" * (MIB + 1)},
        )
    assert_problem(response, 413, "payload_too_large")


@pytest.mark.slow
async def test_sign_in_server__streamed_multipart_gets_413_and_nothing_is_spooled(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Against uvicorn and a socket: the answer comes while the client is still sending, and
    the temporary directory (where a parsed upload would spool) gets nothing."""
    spool = tmp_path / "spool"
    spool.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spool))
    port = closed_port()
    async with built_services(db_url, tmp_path) as services:
        config = uvicorn.Config(
            combined_app(services), host="127.0.0.1", port=port, log_config=None, lifespan="off"
        )
        server = uvicorn.Server(config)
        task = asyncio.create_task(server.serve())
        while not server.started:
            await asyncio.sleep(0.02)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(
            b"POST /app/sign-in HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n"
            b"Content-Type: multipart/form-data; boundary=XyZ\r\n\r\n"
        )
        sent = 0
        largest_spool = 0

        async def send_forever() -> None:
            nonlocal sent, largest_spool
            payload = (
                b'--XyZ\r\nContent-Disposition: form-data; name="api_key"; filename="k"\r\n\r\n'
            )
            while sent < 500 * MIB:
                writer.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
                await writer.drain()
                sent += len(payload)
                payload = b"x" * CHUNK
                spooled = sum(f.stat().st_size for f in spool.rglob("*") if f.is_file())
                largest_spool = max(largest_spool, spooled)

        sender = asyncio.create_task(send_forever())
        try:
            answer = await asyncio.wait_for(reader.read(4096), timeout=30)
            sent_when_answered = sent
        finally:
            sender.cancel()
            with contextlib.suppress(asyncio.CancelledError, ConnectionError):
                await sender
            writer.close()
            server.should_exit = True
            await task
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b"payload_too_large" in answer
    assert sent_when_answered < 16 * MIB  # the loopback buffers, not the body, set this bound
    assert largest_spool == 0
    assert list(spool.iterdir()) == []
