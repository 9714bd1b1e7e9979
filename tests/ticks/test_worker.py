"""The worker loop of `postbag worker` and `postbag dev`, run in this process against real
Postgres and real loopback receivers (the multi-process scenarios are in test_selfhost.py)."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from datetime import timedelta

import pytest

from core.outbox.worker import WorkerOptions
from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from core.ticks.worker import Worker
from local.cli import build_parser
from tests.support.api import api_client
from tests.support.builders import (
    Tenant,
    make_deliveries,
    make_delivery,
    make_form,
    make_route_to,
    setup_form,
)
from tests.support.peers import hang, held, receiver, status
from tests.support.records import rows


async def _stopped(worker: Worker, task: asyncio.Task[None]) -> None:
    worker.stop.set()
    await asyncio.wait_for(task, 30)


async def _wait_for(predicate: object, seconds: float = 10) -> None:
    assert callable(predicate)
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def _backlog(conn: Conn, url: str, count: int) -> tuple[Tenant, str]:
    """A form routed to `url`, with `count` deliveries due to it now."""
    tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
    dst, rte = await make_route_to(conn, tenant, form, config={"url": url})
    await make_deliveries(conn, tenant, form, dst, rte, count=count, url=url, due=utcnow())
    return tenant, form


async def test_worker__a_notification_wakes_it_before_the_tick(
    services: Services, conn: Conn
) -> None:
    worker = Worker(services, name="worker@test", ticks=["deliver"])
    with receiver() as peer:
        task = asyncio.create_task(worker.run())
        try:
            await asyncio.sleep(0.5)  # the first (empty) pass has run
            tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
            dst, rte = await make_route_to(conn, tenant, form, config={"url": peer.url})
            _, dlv = await make_delivery(conn, tenant, form, dst, rte, target={"url": peer.url})
            started = time.monotonic()
            await conn.execute("SELECT pg_notify('postbag_deliveries', %(id)s)", {"id": dlv})
            await _wait_for(lambda: peer.requests)
            elapsed = time.monotonic() - started
        finally:
            await _stopped(worker, task)
    assert elapsed < 5  # far sooner than the 15 s tick
    beats = await rows(conn, "SELECT worker_id, tick FROM worker_heartbeats")
    assert beats == [{"worker_id": "worker@test", "tick": "deliver"}]


async def test_worker__a_burst_of_notifications_costs_one_pass(
    services: Services, conn: Conn, caplog: pytest.LogCaptureFixture
) -> None:
    worker = Worker(services, name="worker@test", ticks=["deliver"])
    with caplog.at_level(logging.DEBUG, logger="postbag"):  # an idle pass logs at debug
        task = asyncio.create_task(worker.run())
        try:
            # The first passes (at start, and on LISTEN) have run, however long a busy
            # machine takes to start them.
            await _wait_for(lambda: sum(r.getMessage() == "tick pass" for r in caplog.records) >= 2)
            await asyncio.sleep(0.2)
            caplog.clear()
            # Fifty notifications at once (one commit delivers them together, as a burst of
            # submits does), not fifty round trips that a busy machine spreads over passes.
            await conn.execute(
                "SELECT pg_notify('postbag_deliveries', n::text) FROM generate_series(1, 50) n"
            )
            await asyncio.sleep(1.0)
        finally:
            await _stopped(worker, task)
    passes = [r for r in caplog.records if r.getMessage() == "tick pass"]
    assert 1 <= len(passes) <= 2, len(passes)


async def test_worker__stop_gives_back_waiting_claims_at_once_and_late_sends_after_grace(
    services: Services, conn: Conn
) -> None:
    # One send at a time, every answer 20 s late: one send under way, two claims waiting.
    worker = Worker(services, name="worker@test", ticks=["deliver"], concurrency=1, grace=0.5)
    with receiver(hang(20)) as peer:
        tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
        dst, rte = await make_route_to(conn, tenant, form, config={"url": peer.url})
        await make_deliveries(
            conn, tenant, form, dst, rte, count=3, url=peer.url, due=utcnow() - timedelta(1)
        )
        task = asyncio.create_task(worker.run())
        await _wait_for(lambda: peer.requests)
        started = time.monotonic()
        await _stopped(worker, task)
        elapsed = time.monotonic() - started
    assert elapsed < 3, elapsed  # the grace (0.5 s) and the give-back, not the 20 s answer
    assert len(peer.requests) == 1  # the waiting claims were never sent
    left = await rows(
        conn, "SELECT status, attempts, claimed_until, last_detail FROM deliveries ORDER BY id"
    )
    assert (
        left
        == [
            {
                "status": "pending",
                "attempts": 0,
                "claimed_until": None,
                "last_detail": "worker_stopped",
            }
        ]
        * 3
    )


@pytest.mark.parametrize(
    ("answer", "passes"),
    [(None, 5), (1.0, 2)],
    ids=["fast: each pass follows the last at once", "1 s: freed room is claimed at once"],
)
async def test_worker__a_backlog_of_several_passes_waits_for_no_tick(
    services: Services, conn: Conn, answer: float | None, passes: int
) -> None:
    # Each pass claims one batch (its budget leaves no room for a second), at most the
    # destination's 8 sends. With fast answers the next pass follows at once; with 1 s
    # answers the next finds the destination full and ends, and once those 8 are answered
    # the rest is claimed. No notification, and far less than a tick (15 s) in all.
    backlog = passes * WorkerOptions().per_destination
    worker = Worker(services, name="worker@test", ticks=["deliver"], deliver_budget=0.5)
    with receiver() if answer is None else receiver(hang(answer)) as peer:
        await _backlog(conn, peer.url, backlog)
        task = asyncio.create_task(worker.run())
        try:
            await _wait_for(lambda: len(peer.requests) == backlog, seconds=10)
        finally:
            await _stopped(worker, task)
    [sent] = await rows(conn, "SELECT count(*) AS n FROM deliveries WHERE status = 'sent'")
    assert sent == {"n": backlog}


async def test_worker__overlapping_passes_share_one_claim_window(
    services: Services, conn: Conn
) -> None:
    # One send at a time (a window of 4 claims), every answer held: passes that follow one
    # another while the window is full claim nothing more than the first one did.
    release = threading.Event()
    worker = Worker(
        services, name="worker@test", ticks=["deliver"], concurrency=1, deliver_budget=0.5
    )
    with receiver(held(release)) as peer:
        tenant, _ = await setup_form(conn, plan="self_hosted", routes=0)
        for _ in range(12):
            other = await make_form(conn, tenant)
            dst, rte = await make_route_to(conn, tenant, other, config={"url": peer.url})
            await make_deliveries(
                conn, tenant, other, dst, rte, count=2, url=peer.url, due=utcnow()
            )
        task = asyncio.create_task(worker.run())
        try:
            await _wait_for(lambda: peer.requests)
            await asyncio.sleep(1.5)  # three passes' budgets
            [sending] = await rows(
                conn, "SELECT count(*) AS n FROM deliveries WHERE status = 'sending'"
            )
        finally:
            release.set()
            await _stopped(worker, task)
    assert sending == {"n": 4}


async def test_worker__cancelled_it_stops_every_pass_under_way(
    services: Services, conn: Conn
) -> None:
    # A cancelled worker (not stopped: no grace) leaves no pass behind waiting out its
    # 20 s sends; their claims expire and another pass takes them.
    worker = Worker(services, name="worker@test", ticks=["deliver"], deliver_budget=0.5)
    with receiver(hang(20)) as peer:
        await _backlog(conn, peer.url, 3)
        task = asyncio.create_task(worker.run())
        await _wait_for(lambda: len(peer.requests) == 3)
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=5)
    assert done == {task} and task.cancelled()


async def test_worker__sends_still_under_way_hold_up_no_later_claim(
    services: Services, conn: Conn
) -> None:
    # The first pass's claims end with the slow destination's sends under way; a delivery
    # to another destination that comes due then is sent while those still wait.
    per_destination = WorkerOptions().per_destination
    release = threading.Event()
    worker = Worker(services, name="worker@test", ticks=["deliver"], deliver_budget=0.5)
    with receiver(held(release)) as slow, receiver() as fast:
        tenant, _ = await _backlog(conn, slow.url, 3 * per_destination)
        task = asyncio.create_task(worker.run())
        try:
            await _wait_for(lambda: len(slow.requests) == per_destination)
            other_form = await make_form(conn, tenant)
            fdst, frte = await make_route_to(conn, tenant, other_form, config={"url": fast.url})
            _, dlv = await make_delivery(
                conn, tenant, other_form, fdst, frte, target={"url": fast.url}
            )
            await conn.execute("SELECT pg_notify('postbag_deliveries', %(id)s)", {"id": dlv})
            await _wait_for(lambda: fast.requests)
            assert len(slow.requests) == per_destination  # none of them answered yet
        finally:
            release.set()
            await _stopped(worker, task)
    assert [r.headers["webhook-id"] for r in fast.requests] == [dlv]


@pytest.mark.parametrize(
    "args",
    [
        ["worker", "--concurrency", "0"],
        ["worker", "--ticks", "deliver,nope"],
        ["worker", "--ticks", ""],
        ["serve", "--workers", "0"],
    ],
)
def test_cli__worker_and_serve_refuse_bad_arguments(
    args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(args)
    assert exited.value.code == 2
    assert f"postbag {args[0]}: error: argument {args[1]}" in capsys.readouterr().err


def test_cli__worker_runs_each_tick_named_once() -> None:
    args = build_parser().parse_args(["worker", "--ticks", "deliver, digest,deliver"])
    assert args.ticks == ("deliver", "digest")


async def test_worker__retry_by_hand_and_a_replay_wake_it_before_the_tick(
    services: Services, conn: Conn
) -> None:
    worker = Worker(services, name="worker@test", ticks=["deliver"])
    with receiver(status(404)) as peer:
        tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
        dst, rte = await make_route_to(conn, tenant, form, config={"url": peer.url})
        _, one = await make_delivery(conn, tenant, form, dst, rte, target={"url": peer.url})
        _, two = await make_delivery(conn, tenant, form, dst, rte, target={"url": peer.url})
        task = asyncio.create_task(worker.run())
        try:
            await _wait_for(lambda: len(peer.requests) == 2)  # both dead (404)
            await asyncio.sleep(0.5)  # the passes of the start and the LISTEN have ended
            peer.respond = status(200)
            async with api_client(services, tenant.key) as api:
                started = time.monotonic()
                retried = await api.post(f"/v1/deliveries/{one}/retry")
                assert retried.status_code == 200, retried.text
                await _wait_for(lambda: len(peer.requests) == 3)
                by_hand = time.monotonic() - started
                started = time.monotonic()
                replayed = await api.post(
                    "/v1/deliveries/replay",
                    json={"since": (utcnow() - timedelta(hours=1)).isoformat()},
                )
                assert replayed.status_code == 202, replayed.text
                await _wait_for(lambda: len(peer.requests) == 4)
                replay = time.monotonic() - started
        finally:
            await _stopped(worker, task)
    assert by_hand < 5 and replay < 5  # far sooner than the 15 s tick
    sent = await rows(conn, "SELECT id FROM deliveries WHERE status = 'sent' ORDER BY id")
    assert sent == [{"id": dlv} for dlv in sorted((one, two))]
