from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from core.owner.organizations import authenticate
from core.platform.db import Conn
from core.platform.services import Services
from tests.support.builders import make_destination, make_form, make_route, make_tenant
from tests.support.cli import postbag, subprocess_env
from tests.support.dashboard import csrf_of, dashboard_client
from tests.support.peers import receiver
from tests.support.records import rows
from tests.support.settings import TEST_SECRET_KEY


async def _all_text(conn: Conn) -> str:
    cur = await conn.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
    )
    dumps = []
    for row in await cur.fetchall():
        rows = await (
            await conn.execute(f'SELECT t::text AS line FROM "{row["table_name"]}" t')
        ).fetchall()
        dumps.extend(r["line"] for r in rows)
    return "\n".join(dumps)


async def test_create_org__prints_a_key_that_authenticates_and_is_not_stored(
    db_url: str, conn: Conn
) -> None:
    result = postbag(
        "create-org",
        "--name",
        "Acme",
        "--plan",
        "pro",
        "--json",
        env=subprocess_env(POSTBAG_DATABASE_URL=db_url),
    )
    assert result.returncode == 0, result.stderr
    printed = json.loads(result.stdout)
    assert set(printed) == {"organization_id", "api_key"}
    scope = await authenticate(conn, printed["api_key"])
    assert scope.organization_id == printed["organization_id"]
    plan = await (await conn.execute("SELECT plan FROM organizations")).fetchone()
    assert plan == {"plan": "pro"}
    role = await (await conn.execute("SELECT role FROM api_keys")).fetchone()
    assert role == {"role": "owner"}  # the organization's first key holds everything
    stored = await _all_text(conn)
    assert printed["api_key"] not in stored
    assert printed["api_key"][len("pb_") :] not in stored
    assert printed["api_key"] not in result.stderr


async def test_create_org__defaults_to_self_hosted_outside_the_hosted_service(
    db_url: str, conn: Conn
) -> None:
    self_hosted = postbag(
        "create-org", "--name", "Ours", "--json", env=subprocess_env(POSTBAG_DATABASE_URL=db_url)
    )
    hosted = postbag(
        "create-org",
        "--name",
        "Customer",
        "--json",
        env=subprocess_env(POSTBAG_DATABASE_URL=db_url, POSTBAG_HOSTED="true"),
    )
    assert (self_hosted.returncode, hosted.returncode) == (0, 0), self_hosted.stderr
    plans = await rows(conn, "SELECT id, plan FROM organizations")
    assert {row["id"]: row["plan"] for row in plans} == {
        json.loads(self_hosted.stdout)["organization_id"]: "self_hosted",
        json.loads(hosted.stdout)["organization_id"]: "free",
    }


async def test_set_plan__changes_the_plan_and_refuses_unknown_orgs(db_url: str, conn: Conn) -> None:
    env = subprocess_env(POSTBAG_DATABASE_URL=db_url)
    created = json.loads(postbag("create-org", "--name", "A", "--json", env=env).stdout)
    assert postbag("set-plan", created["organization_id"], "team", env=env).returncode == 0
    row = await (await conn.execute("SELECT plan FROM organizations")).fetchone()
    assert row == {"plan": "team"}
    recorded = await conn.execute("SELECT actor_kind, action, subject, via FROM audit_log")
    assert await recorded.fetchall() == [
        {"actor_kind": "operator", "action": "plan.changed", "subject": "team", "via": "cli"}
    ]
    missing = postbag("set-plan", "org_0000000000000000000000000", "team", env=env)
    assert missing.returncode == 1
    assert "no organization" in missing.stderr


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start_dev(workdir: Path, port: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "local.cli", "dev", "--port", str(port)],
        cwd=workdir,
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _wait_healthy(proc: subprocess.Popen[str], port: int) -> httpx.Response:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
        try:
            return httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)
        except httpx.TransportError:
            time.sleep(0.3)
    raise AssertionError("postbag dev did not answer /health in time")


def _stop(proc: subprocess.Popen[str]) -> str:
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    return out


@pytest.mark.slow
def test_dev__embedded_postgres_serves_health_stops_on_sigint_and_restarts(
    pg_home: Path,
) -> None:
    port = _free_port()
    first = _start_dev(pg_home, port)
    try:
        response = _wait_healthy(first, port)
    finally:
        out = _stop(first)
    assert response.status_code == 200
    assert response.json()["database"] is True
    assert re.search(r"API key +pb_", out)
    assert "the database is an embedded PostgreSQL" in out  # dev says which defaults it took
    assert (pg_home / ".postbag" / "pg" / "PG_VERSION").exists()

    second = _start_dev(pg_home, port)
    try:
        again = _wait_healthy(second, port)
        v1 = httpx.get(f"http://127.0.0.1:{port}/v1/openapi.json", timeout=5)
    finally:
        out = _stop(second)
    assert again.status_code == 200
    assert v1.status_code == 200
    assert "API key" not in out  # same data: the first start's block is not shown again


async def test_dev__no_ticks_serves_submits_and_leaves_delivery_to_a_tick(
    db_url: str, conn: Conn, tmp_path: Path
) -> None:
    tenant = await make_tenant(conn)
    form = await make_form(conn, tenant)
    with receiver() as peer:
        hook = await make_destination(conn, tenant, config={"url": peer.url + "/hook"})
        await make_route(conn, tenant, form, hook)
        env = subprocess_env(
            POSTBAG_DATABASE_URL=db_url,
            POSTBAG_SECRET_KEY=TEST_SECRET_KEY,
            POSTBAG_ALLOW_PRIVATE_TARGETS="true",  # the receiver is on loopback
        )
        port = _free_port()
        proc = subprocess.Popen(
            [sys.executable, "-m", "local.cli", "dev", "--no-ticks", "--port", str(port)],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            assert _wait_healthy(proc, port).status_code == 200
            posted = httpx.post(
                f"http://127.0.0.1:{port}/s/{form}",
                data={"name": "Ada"},
                headers={"Accept": "application/json"},
                timeout=10,
            )
            time.sleep(1.5)  # a runner with ticks would have delivered at once (LISTEN)
            pending = await rows(conn, "SELECT status FROM deliveries")
        finally:
            out = _stop(proc)
        assert posted.status_code == 201
        assert "Ticks are off" in out
        assert "Development mode" in out and "POSTBAG_ALLOW_PRIVATE_TARGETS is on" in out
        assert pending == [{"status": "pending"}] and peer.requests == []
        ticked = postbag("tick", "deliver", env=env)
        assert ticked.returncode == 0, ticked.stderr
    assert await rows(conn, "SELECT status FROM deliveries") == [{"status": "sent"}]
    assert [json.loads(r.body)["receipt"] for r in peer.requests] == [posted.json()["receipt"]]


async def test_create_org__owner_email_prints_a_one_time_link_that_sets_the_password(
    db_url: str, conn: Conn, services: Services
) -> None:
    env = subprocess_env(POSTBAG_DATABASE_URL=db_url)
    args = ["create-org", "--name", "Acme", "--owner-email", "Ada@Example.com", "--json"]
    result = postbag(*args, env=env)
    assert result.returncode == 0, result.stderr
    printed = json.loads(result.stdout)
    link = printed["owner_link"]
    assert link.startswith("http://127.0.0.1:8080/app/reset/")
    path = link.removeprefix("http://127.0.0.1:8080")
    assert path.rsplit("/", 1)[1] not in await _all_text(conn)
    [owner] = await rows(conn, "SELECT organization_id, role FROM memberships")
    assert owner == {"organization_id": printed["organization_id"], "role": "owner"}
    async with dashboard_client(services) as client:
        page = await client.get(path)
        password = "correct horse battery"
        set_ = await client.post(
            path, data={"csrf": csrf_of(page.text), "password": password, "repeat": password}
        )
        assert set_.status_code == 303 and (await client.get("/app")).status_code == 200
        assert (await client.get(path)).status_code == 404
    # An owner who has a password is made owner of another organization without a link.
    again = json.loads(postbag(*args[:2], "Beta", *args[3:], env=env).stdout)
    assert "owner_link" not in again
    assert len(await rows(conn, "SELECT role FROM memberships WHERE role = 'owner'")) == 2


@pytest.mark.slow
def test_create_org__the_owner_link_follows_where_the_installation_serves(db_url: str) -> None:
    args = ["create-org", "--name", "Acme", "--json"]
    # Unset POSTBAG_PUBLIC_URL: the port `postbag serve` listens on ($PORT), said on stderr.
    env = subprocess_env(POSTBAG_DATABASE_URL=db_url, PORT="9123")
    on_port = postbag(*args, "--owner-email", "a@example.com", env=env)
    assert on_port.returncode == 0, on_port.stderr
    assert json.loads(on_port.stdout)["owner_link"].startswith("http://127.0.0.1:9123/app/reset/")
    assert "POSTBAG_PUBLIC_URL is unset" in on_port.stderr
    # Set: the installation's address, and nothing to say.
    env["POSTBAG_PUBLIC_URL"] = "https://forms.example.org/"
    public = postbag(*args, "--owner-email", "b@example.com", env=env)
    assert public.returncode == 0, public.stderr
    link = json.loads(public.stdout)["owner_link"]
    assert link.startswith("https://forms.example.org/app/reset/")
    assert "POSTBAG_PUBLIC_URL" not in public.stderr
