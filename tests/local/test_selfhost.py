"""`postbag serve` and `postbag worker` as an operator runs them: real processes, the real
Postgres, real loopback receivers."""

from __future__ import annotations

import asyncio
import itertools
import signal
import socket
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest

from core.http.server import GRACE_SECONDS
from core.platform.db import Conn
from tests.support.api import WEBHOOK, assert_problem
from tests.support.builders import make_delivery, make_form, make_route_to, make_tenant, setup_form
from tests.support.cli import (
    postbag,
    serving,
    spawn,
    subprocess_env,
    terminate,
    wait_until_serving,
)
from tests.support.peers import Answer, Request, closed_port, receiver
from tests.support.records import delivery, rows
from tests.support.settings import TEST_SECRET_KEY

pytestmark = pytest.mark.slow


def _env(db_url: str, tmp_path: Path, **extra: str) -> dict[str, str]:
    return subprocess_env(
        POSTBAG_DATABASE_URL=db_url,
        POSTBAG_SECRET_KEY=TEST_SECRET_KEY,
        POSTBAG_STORAGE_URL=f"file://{tmp_path / 'files'}",
        **extra,
    )


async def _wait_for_beat(conn: Conn, pid: int) -> None:
    """Until the worker with this process id has recorded a deliver pass."""
    deadline = time.monotonic() + 60
    while not await rows(
        conn,
        "SELECT 1 FROM worker_heartbeats WHERE tick = 'deliver' AND worker_id LIKE %(name)s",
        name=f"worker@%:{pid}",
    ):
        assert time.monotonic() < deadline, "the worker never finished a pass"
        await asyncio.sleep(0.1)


async def test_serve__refuses_to_start_without_a_secret_key(db_url: str, tmp_path: Path) -> None:
    port = str(closed_port())
    no_key = postbag(
        "serve", "--port", port, env=subprocess_env(POSTBAG_DATABASE_URL=db_url), cwd=tmp_path
    )
    nothing = postbag("serve", "--port", port, env=subprocess_env(), cwd=tmp_path)
    assert (no_key.returncode, no_key.stderr) == (1, "postbag: POSTBAG_SECRET_KEY is required\n")
    assert (nothing.returncode, nothing.stderr) == (
        1,
        "postbag: POSTBAG_DATABASE_URL and POSTBAG_SECRET_KEY are required\n",
    )
    assert not (tmp_path / ".postbag").exists()  # no embedded PostgreSQL, no generated key


async def test_worker__refuses_to_start_without_a_database_url(tmp_path: Path) -> None:
    result = postbag("worker", env=subprocess_env(POSTBAG_SECRET_KEY=TEST_SECRET_KEY), cwd=tmp_path)
    assert (result.returncode, result.stderr) == (
        1,
        "postbag: POSTBAG_DATABASE_URL is required\n",
    )
    assert not (tmp_path / ".postbag").exists()


async def test_serve__refuses_a_loopback_webhook_target_by_default(
    db_url: str, conn: Conn, tmp_path: Path
) -> None:
    tenant = await make_tenant(conn)
    with serving(_env(db_url, tmp_path)) as base:
        refused = [
            httpx.post(
                base + "/v1/destinations",
                json={**WEBHOOK, "config": {"url": url}},
                headers=tenant.headers,
                timeout=10,
            )
            for url in ("https://127.0.0.1:9000/hook", "http://localhost:9000/hook")
        ]
    for response in refused:
        assert_problem(response, 422, "invalid_config")
    assert await rows(conn, "SELECT id FROM destinations") == []


async def test_serve__a_serve_only_replica_is_healthy_and_sees_workers_elsewhere(
    db_url: str, conn: Conn, tmp_path: Path
) -> None:
    env = _env(db_url, tmp_path)
    with serving(env) as base:
        alone = httpx.get(base + "/health", timeout=10)
        worker = spawn("worker", "--ticks", "deliver", env=env)
        try:
            await _wait_for_beat(conn, worker.pid)
            beside = httpx.get(base + "/health", timeout=10)
        finally:
            code, out, _ = terminate(worker)
        assert code == 0, out
    assert alone.status_code == 200
    assert alone.json() | {"worker_heartbeat_age_seconds": None} == {
        "status": "ok",
        "database": True,
        "worker_heartbeat_age_seconds": None,
        "oldest_due_delivery_age_seconds": None,
        "stuck_file_deletions": 0,
        "live_workers": 0,
        "replica_worker": None,
        "replica_worker_heartbeat_age_seconds": None,
    }
    assert beside.status_code == 200
    body = beside.json()
    assert (body["live_workers"], body["replica_worker"]) == (1, None)
    assert body["worker_heartbeat_age_seconds"] < 60


async def test_serve_and_two_workers__each_delivery_is_received_exactly_once(
    db_url: str, conn: Conn, tmp_path: Path
) -> None:
    with receiver() as peer:
        tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
        for path in ("/a", "/b"):
            await make_route_to(conn, tenant, form, config={"url": peer.url + path})
        env = _env(
            db_url,
            tmp_path,
            POSTBAG_ALLOW_PRIVATE_TARGETS="true",  # the receiver is on loopback
            POSTBAG_TRUSTED_PROXIES="127.0.0.1/32",  # one client address per submission
        )
        workers = [spawn("worker", env=env) for _ in range(2)]
        try:
            with serving(env, "--workers", "2") as base:
                for worker in workers:
                    await _wait_for_beat(conn, worker.pid)
                receipts = []
                async with httpx.AsyncClient(base_url=base, timeout=10) as client:
                    for n in range(30):
                        response = await client.post(
                            f"/s/{form}",
                            data={"name": f"Ada {n}"},
                            headers={
                                "Accept": "application/json",
                                "X-Forwarded-For": f"10.0.0.{n}",
                            },
                        )
                        assert response.status_code == 201, response.text
                        receipts.append(response.json()["receipt"])
                deadline = time.monotonic() + 60
                while len(peer.requests) < 60 and time.monotonic() < deadline:
                    await asyncio.sleep(0.1)
                await asyncio.sleep(1.0)  # a duplicate would arrive now
                health = httpx.get(base + "/health", timeout=10).json()
        finally:
            stopped = [terminate(worker) for worker in workers]
    assert [code for code, _, _ in stopped] == [0, 0], [out for _, out, _ in stopped]
    received = Counter(request.headers["webhook-id"] for request in peer.requests)
    sent = await rows(conn, "SELECT id, status, attempts FROM deliveries")
    assert len(sent) == 60
    assert received == {row["id"]: 1 for row in sent}
    assert {(row["status"], row["attempts"]) for row in sent} == {("sent", 1)}
    assert len(set(receipts)) == 30
    assert (health["live_workers"], health["replica_worker"]) == (2, None)


async def test_worker__sigterm_mid_send_exits_in_its_grace_and_the_send_is_not_left_to_its_lease(
    db_url: str, conn: Conn, tmp_path: Path
) -> None:
    calls = itertools.count()

    def first_hangs(_request: Request) -> Answer:
        if next(calls) == 0:
            time.sleep(30)
        return 200, {}, b"ok"

    env = _env(db_url, tmp_path, POSTBAG_ALLOW_PRIVATE_TARGETS="true")
    with receiver(first_hangs) as peer:
        tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
        dst, rte = await make_route_to(conn, tenant, form, config={"url": peer.url})
        first = spawn("worker", "--grace", "2", env=env)
        try:
            await _wait_for_beat(conn, first.pid)
            _, dlv = await make_delivery(conn, tenant, form, dst, rte, target={"url": peer.url})
            await conn.execute("SELECT pg_notify('postbag_deliveries', '')")
            deadline = time.monotonic() + 30
            while not peer.requests:
                assert time.monotonic() < deadline, "the first worker never sent"
                await asyncio.sleep(0.05)
            other = spawn("worker", env=env)
            await _wait_for_beat(conn, other.pid)
        finally:
            code, out, took = terminate(first)
        try:
            deadline = time.monotonic() + 15
            while (await delivery(conn, dlv))["status"] != "sent":
                assert time.monotonic() < deadline, "the other worker did not send it"
                await asyncio.sleep(0.1)
            resent_after = time.monotonic() - deadline + 15
        finally:
            other_code, other_out, _ = terminate(other)
    assert code == 0, out
    assert took < 2 + 3, took  # the grace, then the give-back; not the 30 s answer
    assert other_code == 0, other_out
    assert resent_after < 10  # woken by the give-back, not the 5-minute lease
    assert [r.headers["webhook-id"] for r in peer.requests] == [dlv, dlv]
    row = await delivery(conn, dlv)
    assert (row["status"], row["attempts"]) == ("sent", 1)
    given_back = await rows(
        conn, "SELECT outcome FROM delivery_attempts WHERE delivery_id = %(id)s", id=dlv
    )
    assert given_back == [{"outcome": "sent"}]  # the stopped send spent no attempt


async def test_serve__sigterm_stops_accepting_and_lets_a_request_in_flight_finish(
    db_url: str, conn: Conn, tmp_path: Path
) -> None:
    _, form = await setup_form(conn, routes=0)
    port = closed_port()
    proc = spawn("serve", "--host", "127.0.0.1", "--port", str(port), env=_env(db_url, tmp_path))
    wait_until_serving(proc, f"http://127.0.0.1:{port}/health")
    body = b"name=Ada&message=" + b"x" * 2000
    head = (
        f"POST /s/{form} HTTP/1.1\r\nHost: forms\r\nAccept: application/json\r\n"
        "Content-Type: application/x-www-form-urlencoded\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as client:
        client.sendall(head + body[:1000])  # the request is in flight: half its body sent
        time.sleep(0.3)
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        with pytest.raises(OSError):  # no new connections once stopping
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
        client.sendall(body[1000:])
        answer = client.makefile("rb").read()
    out, _ = proc.communicate(timeout=30)
    took = time.monotonic() - started
    assert answer.startswith(b"HTTP/1.1 201"), answer[:200]
    assert proc.returncode == 0, out
    assert took < GRACE_SECONDS + 2
    assert len(await rows(conn, "SELECT id FROM submissions")) == 1


async def test_serve__links_follow_host_and_port_unless_a_public_url_is_set(
    db_url: str, conn: Conn, tmp_path: Path
) -> None:
    tenant = await make_tenant(conn)
    form = await make_form(conn, tenant)
    seen: list[tuple[int, list[dict[str, str]], str]] = []
    for public in (None, "https://forms.example.com"):
        env = _env(db_url, tmp_path, **({"POSTBAG_PUBLIC_URL": public} if public else {}))
        port = closed_port()
        # Two processes: each reads the address their parent chose.
        proc = spawn("serve", "--host", "127.0.0.1", "--port", str(port), "--workers", "2", env=env)
        try:
            wait_until_serving(proc, f"http://127.0.0.1:{port}/health")
            base = f"http://127.0.0.1:{port}"
            bodies = [
                httpx.get(f"{base}/v1/forms/{form}", headers=tenant.headers, timeout=10).json()
                for _ in range(4)
            ]
        finally:
            code, out, _ = terminate(proc)
        assert code == 0, out
        seen.append((port, bodies, out))
    (port, unset, said), (_, configured, quiet) = seen
    for body in unset:
        assert body["submit_url"] == f"http://127.0.0.1:{port}/s/{form}"
        assert f'action="http://127.0.0.1:{port}/s/{form}"' in body["html_snippet"]
    assert "POSTBAG_PUBLIC_URL is unset" in said and f"http://127.0.0.1:{port}" in said
    for body in configured:
        assert body["submit_url"] == f"https://forms.example.com/s/{form}"
        assert f'action="https://forms.example.com/s/{form}"' in body["html_snippet"]
    assert "POSTBAG_PUBLIC_URL is unset" not in quiet
