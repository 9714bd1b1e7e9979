"""`postbag listen`: a development receiver, driven as a newcomer would (README, 30 seconds)."""

from __future__ import annotations

import re
import shlex
import signal
import socket
import subprocess
import sys
import time

import httpx
import pytest

from core.destinations.webhook import body_bytes, signature_headers
from core.platform.db import Conn
from tests.local.test_cli import _wait_healthy
from tests.support.builders import make_destination, make_form, make_tenant
from tests.support.cli import Output, subprocess_env
from tests.support.peers import free_port
from tests.support.records import rows
from tests.support.settings import TEST_SECRET_KEY

SECRET = "whsec_" + "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LTAxMjM="


def _postbag(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "local.cli", *args],
        env={**env, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _stop(proc: subprocess.Popen[str]) -> str:
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    return out


def _signed(
    secret: str, delivery: str, payload: dict[str, object], event: str = "form.submitted"
) -> tuple[bytes, dict[str, str]]:
    body = body_bytes(payload)
    headers = signature_headers(
        secret=secret, delivery_id=delivery, body=body, timestamp=int(time.time())
    )
    # Header names as an ASGI server hands them over: lower-cased.
    lowered = {name.lower(): value for name, value in headers.items()}
    return body, {
        **lowered,
        "content-type": "application/json",
        "x-postbag-event": event,
        "x-postbag-delivery": delivery,
    }


@pytest.mark.slow
def test_listen__prints_each_delivery_and_whether_both_signatures_verify(db_url: str) -> None:
    port = free_port()
    env = subprocess_env(POSTBAG_DATABASE_URL=db_url)
    proc = _postbag("listen", "--port", str(port), "--secret", SECRET, env=env)
    output = Output(proc)
    try:
        output.until("Listening for webhooks")
        payload = {
            "event": "form.submitted",
            "receipt": "sub_1",
            "form": "frm_1",
            "values": {"email": "ada@example.com", "message": "Hi"},
        }
        good_body, good_headers = _signed(SECRET, "dlv_good", payload)
        bad_body, bad_headers = _signed(
            "whsec_" + "d3JvbmctLXdyb25nLS13cm9uZw==", "dlv_bad", payload
        )
        event = {
            "event": "stream.event",
            "stream": "str_1",
            "receipt": "evt_1",
            "id": "order-7",
            "type": "order.paid",
            "data": {"order": 7, "total": 9.5, "lines": [{"sku": "SOFA"}]},
        }
        event_body, event_headers = _signed(SECRET, "dlv_event", event, "stream.event")
        answers = [
            httpx.post(f"http://127.0.0.1:{port}/", content=body, headers=headers, timeout=10)
            for body, headers in (
                (good_body, good_headers),
                (bad_body, bad_headers),
                (event_body, event_headers),
            )
        ]
        seen = output.until("signatures:", count=3)
    finally:
        _stop(proc)
    assert [a.status_code for a in answers] == [200, 200, 200]
    streamed = seen.split("dlv_event", 1)[1]
    assert "stream.event" in seen.split("dlv_event", 1)[0].rsplit("\n", 1)[1]
    assert "type order.paid  receipt evt_1  stream str_1  id order-7" in streamed
    assert "  total: 9.5" in streamed and '  lines: [{"sku": "SOFA"}]' in streamed
    assert "signatures: both verify" in streamed
    good, bad = seen.split("dlv_good", 1)[1].split("dlv_event", 1)[0].split("dlv_bad", 1)
    assert "receipt sub_1  form frm_1" in good and 'email: "ada@example.com"' in good
    assert "signatures: both verify" in good
    assert "NOT VERIFIED" in bad
    assert "X-Postbag-Signature MISMATCH, webhook-signature MISMATCH" in bad


@pytest.mark.slow
async def test_listen__create_destination_receives_the_first_start_forms_post_from_a_runner(
    db_url: str, conn: Conn
) -> None:
    env = subprocess_env(POSTBAG_DATABASE_URL=db_url, POSTBAG_SECRET_KEY=TEST_SECRET_KEY)
    port, listen_port = free_port(), free_port()
    runner = _postbag("dev", "--port", str(port), env=env)
    printed = Output(runner).until("Postbag is listening")
    try:
        _wait_healthy(runner, port)
        form = re.search(r"Submit URL +http://\S+/s/(frm_\w+)", printed)
        curl = re.search(r"^ +(curl .+)$", printed, re.MULTILINE)
        assert form and curl, printed
        listener = _postbag(
            "listen", "--port", str(listen_port), "--create-destination", form[1], env=env
        )
        heard = Output(listener)
        try:
            heard.until("Listening for webhooks")
            subprocess.run(shlex.split(curl[1]), capture_output=True, timeout=30, check=True)
            seen = heard.until("signatures:")
        finally:
            stopped = _stop(listener)
        keep = ("--create-destination", form[1], "--keep")
        kept = _postbag("listen", "--port", str(listen_port), *keep, env=env)
        kept_out = reused = ""
        try:
            kept_out += Output(kept).until("Listening for webhooks")
        finally:
            kept_out += _stop(kept)
        again = _postbag(
            "listen", "--port", str(listen_port), "--create-destination", form[1], env=env
        )
        try:
            reused += Output(again).until("Listening for webhooks")
        finally:
            reused += _stop(again)
    finally:
        _stop(runner)
    (submission,) = [r["id"] for r in await rows(conn, "SELECT id FROM submissions")]
    assert f"receipt {submission}  form {form[1]}" in seen
    assert 'message: "Hello from curl"' in seen
    assert "signatures: both verify" in seen
    assert "Created webhook destination" in seen
    assert "Removed webhook destination" in stopped
    # The first listener's destination went when it stopped: the second made its own and kept
    # it, and the third used that one and left it alone.
    assert "Created webhook destination" in kept_out and "Kept webhook destination" in kept_out
    assert "Using webhook destination" in reused and "Removed" not in reused
    destinations = await rows(
        conn, "SELECT config, deleted_at IS NULL AS live FROM destinations ORDER BY created_at"
    )
    url = {"url": f"http://127.0.0.1:{listen_port}/"}
    assert destinations == [{"config": url, "live": False}, {"config": url, "live": True}]


def test_listen__a_busy_port_is_one_clear_line_and_exit_1(db_url: str) -> None:
    """The port is taken before `Listening for webhooks` is printed: a busy one is said so."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        env = subprocess_env(POSTBAG_DATABASE_URL=db_url)
        proc = _postbag("listen", "--port", str(port), "--secret", SECRET, env=env)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 1, out
    assert f"postbag: cannot listen on 127.0.0.1:{port}" in out
    assert "Listening for webhooks" not in out
    assert "Traceback" not in out


async def test_listen__removes_only_the_route_it_added_to_a_destination_already_there(
    db_url: str, conn: Conn
) -> None:
    acme = await make_tenant(conn, plan="self_hosted")
    form = await make_form(conn, acme)
    port = free_port()
    target = f"http://127.0.0.1:{port}/"
    destination = await make_destination(conn, acme, config={"url": target})
    env = subprocess_env(POSTBAG_DATABASE_URL=db_url, POSTBAG_SECRET_KEY=TEST_SECRET_KEY)
    proc = _postbag("listen", "--port", str(port), "--create-destination", form, env=env)
    try:
        Output(proc).until("Listening for webhooks")
        live = await rows(conn, "SELECT destination_id FROM routes WHERE deleted_at IS NULL")
    finally:
        stopped = _stop(proc)
    assert live == [{"destination_id": destination}]
    assert f"Removed the route from form {form} to {destination}" in stopped
    assert await rows(conn, "SELECT id FROM routes WHERE deleted_at IS NULL") == []
    assert await rows(conn, "SELECT deleted_at FROM destinations") == [{"deleted_at": None}]
    [route] = await rows(conn, "SELECT id FROM routes")
    # Both recorded, as the operator at the command line.
    recorded = await rows(
        conn, "SELECT actor_kind, action, subject, via FROM audit_log ORDER BY seq"
    )
    assert recorded == [
        {"actor_kind": "operator", "action": action, "subject": route["id"], "via": "cli"}
        for action in ("route.created", "route.deleted")
    ]


@pytest.mark.slow
async def test_listen__the_destination_it_makes_and_removes_is_audited(
    db_url: str, conn: Conn
) -> None:
    acme = await make_tenant(conn, plan="self_hosted")
    form = await make_form(conn, acme)
    stream = "str_" + "0" * 26
    port = free_port()
    env = subprocess_env(POSTBAG_DATABASE_URL=db_url, POSTBAG_SECRET_KEY=TEST_SECRET_KEY)
    proc = _postbag("listen", "--port", str(port), "--create-destination", form, env=env)
    try:
        Output(proc).until("Listening for webhooks")
        [made] = await rows(conn, "SELECT id FROM destinations")
        # Routed from a stream too, meanwhile: that route goes with the destination.
        await conn.execute(
            "INSERT INTO streams (id, organization_id, name) VALUES (%(s)s, %(o)s, 'S')",
            {"s": stream, "o": acme.org},
        )
        await conn.execute(
            "INSERT INTO stream_routes (id, organization_id, stream_id, destination_id)"
            " VALUES ('srt_1', %(o)s, %(s)s, %(d)s)",
            {"s": stream, "o": acme.org, "d": made["id"]},
        )
    finally:
        stopped = _stop(proc)
    assert f"Removed webhook destination {made['id']}" in stopped
    [route] = await rows(conn, "SELECT id FROM routes")
    recorded = await rows(conn, "SELECT actor_kind, action, subject FROM audit_log ORDER BY seq")
    assert recorded == [
        {"actor_kind": "operator", "action": "destination.created", "subject": made["id"]},
        {"actor_kind": "operator", "action": "route.created", "subject": route["id"]},
        {"actor_kind": "operator", "action": "destination.deleted", "subject": made["id"]},
    ]
    live = await rows(conn, "SELECT id FROM stream_routes WHERE deleted_at IS NULL")
    assert live == []


def test_listen__a_busy_port_creates_no_destination(db_url: str) -> None:
    """The port is taken before the destination would be made: nothing is left behind."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        env = subprocess_env(POSTBAG_DATABASE_URL=db_url, POSTBAG_SECRET_KEY=TEST_SECRET_KEY)
        proc = _postbag("listen", "--port", str(port), "--create-destination", "frm_x", env=env)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 1, out
    assert f"postbag: cannot listen on 127.0.0.1:{port}" in out
