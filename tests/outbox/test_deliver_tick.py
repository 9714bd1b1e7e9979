from __future__ import annotations

import asyncio
import json
import time
from datetime import timedelta

import pytest

from core.platform.clock import utcnow
from core.platform.db import Conn
from tests.support.builders import make_delivery, make_route_to, setup_form
from tests.support.cli import postbag, subprocess_env
from tests.support.lambdas import FakeContext, invoke, load_event
from tests.support.peers import hang, receiver
from tests.support.records import delivery
from tests.support.settings import TEST_SECRET_KEY


async def test_deliver_tick_handler__one_pass_on_a_scheduled_event(
    db_url: str, conn: Conn, monkeypatch: pytest.MonkeyPatch
) -> None:
    with receiver() as peer:
        tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
        dst, rte = await make_route_to(conn, tenant, form, config={"url": peer.url})
        _, dlv = await make_delivery(conn, tenant, form, dst, rte, target={"url": peer.url})
        # The pass runs in the handler's own thread and loop; the receiver answers meanwhile.
        results = await asyncio.to_thread(
            invoke,
            "deliver_tick",
            [load_event("eventbridge_scheduled.json"), load_event("eventbridge_scheduled.json")],
            FakeContext(remaining_ms=20_000),
            monkeypatch,
            POSTBAG_DATABASE_URL=db_url,
            POSTBAG_SECRET_KEY=TEST_SECRET_KEY,
            POSTBAG_ALLOW_PRIVATE_TARGETS="true",
        )
    first, warm = results
    assert (first["claimed"], first["sent"]) == (1, 1)
    assert warm.get("claimed", 0) == 0
    assert len(peer.requests) == 1
    assert (await delivery(conn, dlv))["status"] == "sent"
    cur = await conn.execute("SELECT tick, last_pass FROM worker_heartbeats")
    [beat] = await cur.fetchall()
    assert beat["tick"] == "deliver"


async def test_cli_tick__runs_one_deliver_pass(db_url: str, conn: Conn) -> None:
    with receiver() as peer:
        tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
        dst, rte = await make_route_to(conn, tenant, form, config={"url": peer.url})
        _, dlv = await make_delivery(conn, tenant, form, dst, rte, target={"url": peer.url})
        env = subprocess_env(POSTBAG_DATABASE_URL=db_url, POSTBAG_ALLOW_PRIVATE_TARGETS="true")
        result = await asyncio.to_thread(postbag, "tick", "deliver", "--budget", "5", env=env)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1])["sent"] == 1
    assert (await delivery(conn, dlv))["status"] == "sent"
    unknown = await asyncio.to_thread(postbag, "tick", "nope", env=env)
    assert unknown.returncode == 2 and "invalid choice" in unknown.stderr


async def test_deliver_tick_handler__stops_in_time_with_3_seconds_left(
    db_url: str, conn: Conn, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The receiver holds every request for 8 s; the invocation has 3 s left.
    with receiver(hang(8)) as peer:
        tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
        dst, rte = await make_route_to(conn, tenant, form, config={"url": peer.url})
        _, dlv = await make_delivery(conn, tenant, form, dst, rte, target={"url": peer.url})
        started = time.monotonic()
        [result] = await asyncio.to_thread(
            invoke,
            "deliver_tick",
            [load_event("eventbridge_scheduled.json")],
            FakeContext(remaining_ms=3_000),
            monkeypatch,
            POSTBAG_DATABASE_URL=db_url,
            POSTBAG_SECRET_KEY=TEST_SECRET_KEY,
            POSTBAG_ALLOW_PRIVATE_TARGETS="true",
        )
        elapsed = time.monotonic() - started
    assert elapsed < 3.0, elapsed
    assert (result["claimed"], result["given_back"]) == (1, 1)
    row = await delivery(conn, dlv)
    # Given back at once, attempt unspent: not left `sending` for its lease to run out.
    assert (row["status"], row["attempts"], row["claimed_until"]) == ("pending", 0, None)
    stranded = await conn.execute(
        "SELECT count(*) AS n FROM deliveries WHERE status = 'sending'"
        " AND (claimed_until IS NULL OR claim_token IS NULL)"
    )
    assert await stranded.fetchone() == {"n": 0}


async def test_deliver_tick_handler__loops_for_a_shorter_cadence(
    db_url: str, conn: Conn, monkeypatch: pytest.MonkeyPatch
) -> None:
    with receiver() as peer:
        tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
        dst, rte = await make_route_to(conn, tenant, form, config={"url": peer.url})
        # Due a moment after the invocation starts: only a later pass of the loop sends it.
        _, dlv = await make_delivery(
            conn,
            tenant,
            form,
            dst,
            rte,
            target={"url": peer.url},
            next_attempt_at=utcnow() + timedelta(seconds=1.5),
        )
        [result] = await asyncio.to_thread(
            invoke,
            "deliver_tick",
            [load_event("eventbridge_scheduled.json")],
            FakeContext(remaining_ms=30_000),
            monkeypatch,
            POSTBAG_DATABASE_URL=db_url,
            POSTBAG_SECRET_KEY=TEST_SECRET_KEY,
            POSTBAG_ALLOW_PRIVATE_TARGETS="true",
            POSTBAG_DELIVER_LOOP_SECONDS="4",
        )
    assert result["passes"] >= 2
    assert result["sent"] == 1
    assert (await delivery(conn, dlv))["status"] == "sent"
