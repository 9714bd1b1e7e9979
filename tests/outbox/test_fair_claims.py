"""One slow receiver delays no one else: claims capped per destination, fair across
organizations and across destinations within one, every organization visited in turn."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest

from core.outbox import store as outbox
from core.outbox.limits import send_limit_for
from core.outbox.worker import Deliverer, WorkerOptions
from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from tests.outbox.processes import until, wait_exit, worker
from tests.support.builders import (
    make_deliveries,
    make_delivery,
    make_form,
    make_route_to,
    setup_form,
)
from tests.support.peers import Answer, Request, held, receiver
from tests.support.records import rows

BACKLOG = 150
# `postbag tick deliver` sends at most this many to one destination at once.
PER_DESTINATION = WorkerOptions().per_destination


@pytest.mark.slow
@pytest.mark.parametrize("seconds", [8.0, 60.0], ids=["answers_in_8s", "hangs"])
async def test_fair__a_slow_destination_delays_no_other_tenant_nor_sibling(
    db_url: str, conn: Conn, seconds: float
) -> None:
    release = threading.Event()
    with receiver(held(release, seconds)) as slow, receiver() as fast:
        tenant, form = await setup_form(conn, name="A", plan="self_hosted", routes=0)
        sdst, srte = await make_route_to(conn, tenant, form, config={"url": slow.url})
        await make_deliveries(
            conn, tenant, form, sdst, srte, count=BACKLOG, url=slow.url, due=utcnow()
        )
        process = worker(db_url)
        try:
            # The slow destination holds every send it may have; its backlog is claimed
            # by no one while it does.
            await until(lambda: len(slow.requests) == PER_DESTINATION, 30, "the slow sends")
            # Then another tenant's delivery and one of the same tenant to another
            # destination (on another form) come due.
            other, other_form = await setup_form(conn, name="B", plan="self_hosted", routes=0)
            odst, orte = await make_route_to(conn, other, other_form, config={"url": fast.url})
            _, theirs = await make_delivery(
                conn, other, other_form, odst, orte, target={"url": fast.url}
            )
            sibling_form = await make_form(conn, tenant)
            bdst, brte = await make_route_to(conn, tenant, sibling_form, config={"url": fast.url})
            _, sibling = await make_delivery(
                conn, tenant, sibling_form, bdst, brte, target={"url": fast.url}
            )
            await until(lambda: len(fast.requests) == 2, 30, "the other deliveries")
            # Sent while the slow destination still has all but its first sends waiting.
            assert len(slow.requests) == PER_DESTINATION
            assert sorted(r.headers["webhook-id"] for r in fast.requests) == sorted(
                [theirs, sibling]
            )
            [waiting] = await rows(
                conn,
                "SELECT count(*) FILTER (WHERE status = 'pending') AS pending,"
                " count(*) FILTER (WHERE status = 'sending') AS sending"
                " FROM deliveries WHERE destination_id = %(d)s",
                d=sdst,
            )
            assert waiting == {"pending": BACKLOG - PER_DESTINATION, "sending": PER_DESTINATION}
            release.set()
            await wait_exit([process], timeout=90)
        finally:
            release.set()
            if process.poll() is None:
                process.kill()
    assert await rows(conn, "SELECT status, count(*) AS n FROM deliveries GROUP BY status") == [
        {"status": "sent", "n": BACKLOG + 2}
    ]


async def test_fair__destinations_within_a_tenant_take_turns(conn: Conn) -> None:
    now = utcnow()
    tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
    busy, busy_route = await make_route_to(conn, tenant, form, config={"url": "http://x.test/"})
    await make_deliveries(
        conn,
        tenant,
        form,
        busy,
        busy_route,
        count=500,
        url="http://x.test/",
        due=now - timedelta(hours=1),
    )
    quiet_form = await make_form(conn, tenant)
    quiet, quiet_route = await make_route_to(
        conn, tenant, quiet_form, config={"url": "http://y.test/"}
    )
    _, late = await make_delivery(
        conn,
        tenant,
        quiet_form,
        quiet,
        quiet_route,
        target={"url": "http://y.test/"},
        next_attempt_at=now,
    )
    lease = timedelta(minutes=5)
    claims = await outbox.claim_due(conn, now=now, limit=200, lease=lease, per_destination=8)
    # The backlog's destination gives no more than it may send at once; the sibling's one
    # delivery, due last of all, is in the same claim.
    assert sum(c.destination_id == busy for c in claims) == 8
    assert late in {c.id for c in claims}
    # While the busy destination's sends are in flight, claims pass over its backlog.
    assert [
        c.destination_id
        for c in await outbox.claim_due(conn, now=now, limit=200, lease=lease, per_destination=8)
    ] == []


@pytest.mark.slow
async def test_fair__ten_thousand_organizations_each_get_their_turn(conn: Conn) -> None:
    """With 10,000 organizations due at once, each with a backlog, claims of 200 (visiting
    at most 200 organizations each) reach every organization within 50 claims."""
    now = utcnow()
    orgs = 10_000
    await conn.execute(
        "INSERT INTO organizations (id, name, plan)"
        " SELECT 'org_many' || lpad(i::text, 5, '0'), 'Org ' || i, 'self_hosted'"
        " FROM generate_series(1, %(n)s) i",
        {"n": orgs},
    )
    await conn.execute(
        "INSERT INTO forms (id, organization_id, name)"
        " SELECT 'frm_' || id, id, 'Contact' FROM organizations WHERE id LIKE 'org_many%%'"
    )
    await conn.execute(
        "INSERT INTO destinations (id, organization_id, type, name, config)"
        " SELECT 'dst_' || id, id, 'webhook', 'Hook', '{\"url\": \"http://x.test/\"}'"
        " FROM organizations WHERE id LIKE 'org_many%%'"
    )
    await conn.execute(
        "INSERT INTO routes (id, organization_id, form_id, destination_id)"
        " SELECT 'rte_' || id, id, 'frm_' || id, 'dst_' || id"
        " FROM organizations WHERE id LIKE 'org_many%%'"
    )
    await conn.execute(
        'INSERT INTO submissions (id, organization_id, form_id, status, "values", payload_hash)'
        " SELECT 'sub_' || o.id || '_' || i, o.id, 'frm_' || o.id, 'accepted', '{}', '\\x00'"
        " FROM organizations o, generate_series(1, 3) i WHERE o.id LIKE 'org_many%%'"
    )
    await conn.execute(
        "INSERT INTO deliveries (id, organization_id, submission_id, route_id, destination_id,"
        " channel, max_attempts, target, next_attempt_at)"
        " SELECT 'dlv_' || o.id || '_' || i, o.id, 'sub_' || o.id || '_' || i, 'rte_' || o.id,"
        "  'dst_' || o.id, 'webhook', 10, '{}', %(due)s"
        " FROM organizations o, generate_series(1, 3) i WHERE o.id LIKE 'org_many%%'",
        {"due": now - timedelta(minutes=1)},
    )
    await conn.execute("ANALYZE deliveries")
    served: set[str] = set()
    for _ in range(orgs // 200):
        claims = await outbox.claim_due(conn, now=now, limit=200, lease=timedelta(minutes=5))
        assert len(claims) == 200
        served |= {c.organization_id for c in claims}
    assert len(served) == orgs


def test_send_limit_for__fewer_sends_as_answers_slow_down() -> None:
    limits = [send_limit_for(s, ceiling=8, slow_send=1.0) for s in (0.05, 1.0, 2.0, 3.0, 8.0, 10)]
    assert limits == [8, 8, 4, 2, 1, 1]


@pytest.mark.slow
async def test_adaptive__a_slow_but_succeeding_destination_gets_fewer_sends(
    services: Services, conn: Conn
) -> None:
    lock = threading.Lock()
    in_flight = 0
    seen: list[int] = []  # sends in flight as each request arrived
    slow = True

    def respond(_r: Request) -> Answer:
        nonlocal in_flight
        with lock:
            in_flight += 1
            seen.append(in_flight)
        time.sleep(0.9 if slow else 0)
        with lock:
            in_flight -= 1
        return 200, {}, b"ok"

    with receiver(respond) as peer:
        tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
        dst, rte = await make_route_to(conn, tenant, form, config={"url": peer.url})
        await make_deliveries(conn, tenant, form, dst, rte, count=11, url=peer.url, due=utcnow())
        # Answers in 0.9 s where 0.1 s is slow: one send at a time from the first answer on.
        options = WorkerOptions(slow_send=0.1, timeout=5, margin=0.1)
        stats = await Deliverer(services, options=options).run_pass(now=utcnow(), budget=30)
        assert stats["sent"] == 11
        assert max(seen[:8]) > 1
        assert seen[8:] == [1, 1, 1]
        [row] = await rows(conn, "SELECT send_limit FROM destinations WHERE id = %(d)s", d=dst)
        assert row == {"send_limit": 1}
        # Fast answers give the full limit back, one step per answer.
        slow = False
        for _ in range(PER_DESTINATION):
            await make_delivery(conn, tenant, form, dst, rte, target={"url": peer.url})
        stats = await Deliverer(services, options=options).run_pass(now=utcnow(), budget=30)
        assert stats["sent"] == PER_DESTINATION
    [row] = await rows(conn, "SELECT send_limit FROM destinations WHERE id = %(d)s", d=dst)
    assert row == {"send_limit": None}
