"""The submit app over ASGI: a client, bodies streamed in chunks, a fake Turnstile peer."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qsl

import httpx

from core.http.submit_app import create_submit_app
from core.platform.services import Services


def submit_client(
    services: Services, *, client: tuple[str, int] = ("198.51.100.7", 4000)
) -> httpx.AsyncClient:
    app = create_submit_app(services)
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app, client=client), base_url="http://postbag.test"
    )


async def chunks(data: bytes, size: int = 65536) -> AsyncIterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


class FakeTurnstile:
    """A loopback HTTP peer answering siteverify (or another check's service) with a set
    body (a JSON object, or raw bytes), status or delay."""

    def __init__(self) -> None:
        self.body: dict[str, Any] | bytes = {"success": True}
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
            body = self.body if isinstance(self.body, bytes) else json.dumps(self.body).encode()
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
