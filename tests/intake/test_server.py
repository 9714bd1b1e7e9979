"""The body limits against a real server and socket: the server answers 413 and stops
reading while the client is still sending."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import uvicorn

from core.http.submit_app import create_submit_app
from core.platform.db import Conn
from tests.support.builders import setup_form
from tests.support.records import rows
from tests.support.settings import built_services


@contextlib.asynccontextmanager
async def serving(db_url: str, tmp_path: Path) -> AsyncIterator[int]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    async with built_services(db_url, tmp_path) as services:
        config = uvicorn.Config(
            create_submit_app(services),
            host="127.0.0.1",
            port=port,
            log_config=None,
            lifespan="off",
            access_log=False,
        )
        server = uvicorn.Server(config)
        task = asyncio.create_task(server.serve())
        while not server.started:
            await asyncio.sleep(0.02)
        try:
            yield port
        finally:
            server.should_exit = True
            await task


@pytest.mark.slow
@pytest.mark.parametrize(
    ("content_type", "first", "limit"),
    [
        ("application/x-www-form-urlencoded", b"a=", 256 * 1024),
        (
            "multipart/form-data; boundary=XyZ",
            b'--XyZ\r\nContent-Disposition: form-data; name="cv"; filename="cv.txt"\r\n\r\n',
            10 * 1024 * 1024 + 256 * 1024,
        ),
    ],
)
async def test_submit_server__streaming_client_gets_413_and_the_server_stops_reading(
    db_url: str, tmp_path: Path, conn: Conn, content_type: str, first: bytes, limit: int
) -> None:
    _, form = await setup_form(conn, file_fields={"cv": {"types": [".txt"]}})
    async with serving(db_url, tmp_path) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(
            f"POST /s/{form} HTTP/1.1\r\nHost: t\r\nContent-Type: {content_type}\r\n"
            "Accept: application/json\r\nTransfer-Encoding: chunked\r\n\r\n".encode()
        )
        chunk = b"x" * 65536
        sent = 0
        answer = b""

        async def send_forever() -> None:
            nonlocal sent
            payload = first
            while sent < 20 * limit:
                writer.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
                await writer.drain()
                sent += len(payload)
                payload = chunk

        sender = asyncio.create_task(send_forever())
        try:
            answer = await asyncio.wait_for(reader.read(4096), timeout=30)
            sent_when_answered = sent
        finally:
            sender.cancel()
            with contextlib.suppress(asyncio.CancelledError, ConnectionError):
                await sender
            writer.close()
    assert answer.startswith(b"HTTP/1.1 413")
    assert b"payload_too_large" in answer
    # The server answered while the client was still sending: it stopped reading at the
    # limit (what it had accepted beyond that sits in the loopback socket buffers).
    assert sent_when_answered < limit + 8 * 1024 * 1024
    assert sent < 20 * limit
    assert await rows(conn, "SELECT id FROM submissions") == []


@pytest.mark.parametrize("content_type", ["application/json", "application/x-www-form-urlencoded"])
async def test_submit_server__a_client_gone_mid_body_is_one_info_line(
    db_url: str,
    tmp_path: Path,
    conn: Conn,
    caplog: pytest.LogCaptureFixture,
    content_type: str,
) -> None:
    _, form = await setup_form(conn)
    caplog.set_level("INFO")
    async with serving(db_url, tmp_path) as port:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(
            f"POST /s/{form} HTTP/1.1\r\nHost: t\r\nContent-Type: {content_type}\r\n"
            "Content-Length: 10000\r\n\r\n".encode()
            + b"x" * 100
        )
        await writer.drain()
        writer.close()
        await writer.wait_closed()
        for _ in range(100):
            if any("went away" in r.getMessage() for r in caplog.records):
                break
            await asyncio.sleep(0.05)
    gone = [r for r in caplog.records if "went away" in r.getMessage()]
    assert [(r.levelname, r.exc_info) for r in gone] == [("INFO", None)]
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert await rows(conn, "SELECT id FROM submissions") == []
