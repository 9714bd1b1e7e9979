"""The local runner as a newcomer meets it: a real `postbag dev` process on a real embedded
PostgreSQL, the block it prints on first start, and how it stops; and its server against
real sockets: slow clients do not hold connections."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from core.http import protocol
from core.platform.services import Services
from local.runner import serve
from tests.local.test_cli import _wait_healthy
from tests.support.cli import Output, subprocess_env
from tests.support.peers import free_port


def _postgres_pids(pgdata: Path) -> list[int]:
    """The pids of postgres processes serving `pgdata` (any user's)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"/postgres") and str(pgdata).encode() in argv:
            found.append(int(entry.name))
    return found


def _start(workdir: Path, port: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "local.cli", "dev", "--port", str(port)],
        cwd=workdir,
        env=subprocess_env(PYTHONUNBUFFERED="1"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _signal_and_wait(proc: subprocess.Popen[str], signum: int) -> str:
    proc.send_signal(signum)
    out, _ = proc.communicate(timeout=60)
    return out


def _dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


@pytest.mark.slow
def test_dev__first_start_prints_a_ready_block_its_curl_line_submits_and_sigterm_stops_postgres(
    pg_home: Path,
) -> None:
    pgdata = pg_home / ".postbag" / "pg"
    port = free_port()
    proc = _start(pg_home, port)
    try:
        printed = Output(proc).until("Postbag is listening")
        _wait_healthy(proc, port)
        key = re.search(r"API key +(pb_\S+)", printed)
        submit = re.search(r"Submit URL +(http://\S+/s/(frm_\w+))", printed)
        curl = re.search(r"^ +(curl .+)$", printed, re.MULTILINE)
        assert key and submit and curl, printed
        link = re.search(rf"Dashboard   (http://127\.0\.0\.1:{port}/app/link/\S+)", printed)
        assert link, printed
        assert f'<form action="{submit[1]}" method="POST">' in printed
        assert "Email is caught, never sent (POSTBAG_EMAIL_PROVIDER=dev)" in printed
        answered = subprocess.run(
            shlex.split(curl[1]), capture_output=True, text=True, timeout=30, check=True
        )
        home = httpx.get(f"http://127.0.0.1:{port}/", timeout=10)
        # The printed link signs the local owner in, once.
        with httpx.Client(timeout=10, follow_redirects=True) as browser:
            signed_in = browser.get(link[1])
            inbox = browser.get(f"http://127.0.0.1:{port}/app")
            again = httpx.get(link[1], timeout=10)
        forms = httpx.get(
            f"http://127.0.0.1:{port}/v1/forms",
            headers={"Authorization": f"Bearer {key[1]}"},
            timeout=10,
        )
        submissions = httpx.get(
            f"http://127.0.0.1:{port}/v1/submissions",
            headers={"Authorization": f"Bearer {key[1]}"},
            timeout=10,
        )
        # Inviting a teammate works out of the box: the email lands in the mailbox page.
        invited = httpx.post(
            f"http://127.0.0.1:{port}/v1/members",
            json={"email": "grace@example.com", "role": "viewer"},
            headers={"Authorization": f"Bearer {key[1]}"},
            timeout=10,
        )
        mailbox = httpx.get(f"http://127.0.0.1:{port}/app/dev/mail", timeout=10)
        assert _postgres_pids(pgdata)
    finally:
        out = _signal_and_wait(proc, signal.SIGTERM)
    assert proc.returncode == 0, out
    assert _postgres_pids(pgdata) == []
    assert json.loads((pgdata / ".handle_pids.json").read_text()) == []
    assert "Your submission was received" in answered.stdout
    assert home.status_code == 200 and submit[2] in home.text and "/app" in home.text
    assert signed_in.history[0].status_code == 303 and signed_in.url.path == "/app"
    assert inbox.status_code == 200 and "Inbox" in inbox.text
    assert again.status_code == 404
    assert invited.status_code == 201, invited.text
    assert mailbox.status_code == 200 and "grace@example.com" in mailbox.text
    assert f"http://127.0.0.1:{port}/app/invitations/" in mailbox.text
    [form] = forms.json()["data"]
    assert (form["id"], form["name"], form["allowed_origins"]) == (submit[2], "Contact", [])
    [stored] = submissions.json()["data"]
    assert stored["status"] == "accepted"


@pytest.mark.slow
def test_dev__sighup_stops_postgres_though_dead_processes_are_left_in_its_handle_list(
    pg_home: Path,
) -> None:
    pgdata = pg_home / ".postbag" / "pg"
    handles = pgdata / ".handle_pids.json"
    port = free_port()
    first = _start(pg_home, port)
    try:
        _wait_healthy(first, port)
    finally:
        _signal_and_wait(first, signal.SIGINT)
    assert _postgres_pids(pgdata) == []
    # A process killed without its exit hook (kill -9) leaves its pid behind ...
    handles.write_text(json.dumps([_dead_pid()]))
    second = _start(pg_home, port)
    try:
        assert _wait_healthy(second, port).status_code == 200
        # ... and so does one killed while the runner is up.
        handles.write_text(json.dumps([*json.loads(handles.read_text()), _dead_pid()]))
        assert _postgres_pids(pgdata)
    finally:
        out = _signal_and_wait(second, signal.SIGHUP)
    assert second.returncode == 0, out
    assert _postgres_pids(pgdata) == []
    assert json.loads(handles.read_text()) == []


async def _closed_within(reader: asyncio.StreamReader, seconds: float) -> bytes:
    """Read until the server closes the connection; fail if it is still open after `seconds`."""
    return await asyncio.wait_for(reader.read(), seconds)


@pytest.mark.slow
async def test_runner__slow_header_connection_is_closed(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(protocol, "HEAD_TIMEOUT", 0.5)
    port = free_port()
    server = asyncio.create_task(serve(services, host="127.0.0.1", port=port, ticks=False))
    try:
        for _ in range(200):
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                break
            except OSError:
                await asyncio.sleep(0.02)
        # Silent after connecting, and a head sent slowly (slowloris): both are dropped.
        started = time.monotonic()
        assert await _closed_within(reader, 3) == b""
        assert time.monotonic() - started < 2
        writer.close()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /health HTTP/1.1\r\nHost: t\r\n")
        await writer.drain()
        for _ in range(3):
            await asyncio.sleep(0.2)
            writer.write(b"X-Slow: a\r\n")
            await writer.drain()
        assert await _closed_within(reader, 3) == b""
        writer.close()
        # A client that sends its head in time is answered on the same server.
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /health HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        await writer.drain()
        answer = await _closed_within(reader, 5)
        assert answer.startswith(b"HTTP/1.1 200"), answer[:100]
        writer.close()
    finally:
        server.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await server
