from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from core.outbox import store as outbox
from core.outbox.worker import Deliverer, WorkerOptions
from core.platform.clock import month_of, utcnow
from core.platform.db import Conn
from core.platform.services import Services
from tests.support.builders import make_deliveries, make_delivery, make_route_to, setup_form
from tests.support.peers import receiver, status
from tests.support.records import attempts, dead_leaves, delivery

FAST = WorkerOptions(timeout=1, margin=0.1)


async def test_claim_due__fair_across_organizations(conn: Conn) -> None:
    now = utcnow()
    big, big_form = await setup_form(conn, name="Big", plan="self_hosted", routes=0)
    small, small_form = await setup_form(conn, name="Small", plan="self_hosted", routes=0)
    dst, rte = await make_route_to(conn, big, big_form, config={"url": "http://127.0.0.1:9/"})
    await make_deliveries(
        conn,
        big,
        big_form,
        dst,
        rte,
        count=10_000,
        url="http://127.0.0.1:9/",
        due=now - timedelta(hours=1),
    )
    sdst, srte = await make_route_to(conn, small, small_form, config={"url": "http://127.0.0.1:9/"})
    # The small tenant's single delivery became due last of all.
    _, only = await make_delivery(
        conn,
        small,
        small_form,
        sdst,
        srte,
        target={"url": "http://127.0.0.1:9/"},
        next_attempt_at=now,
    )
    # A destination limit as wide as the batch: only the organizations' fairness is at play.
    claims = await outbox.claim_due(
        conn, now=now, limit=200, lease=timedelta(minutes=5), per_destination=200
    )
    assert len(claims) == 200
    assert only in {claim.id for claim in claims}
    assert sum(claim.organization_id == big.org for claim in claims) == 199
    # The oldest of the backlog went first.
    cur = await conn.execute(
        "SELECT count(*) AS n FROM deliveries WHERE status = 'sending' AND claimed_until > %(now)s",
        {"now": now},
    )
    assert (await cur.fetchone()) == {"n": 200}


async def test_claim_due__skips_rows_another_claim_holds_and_reclaims_expired_leases(
    conn: Conn,
) -> None:
    now = utcnow()
    tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
    dst, rte = await make_route_to(conn, tenant, form, config={"url": "http://127.0.0.1:9/"})
    await make_deliveries(
        conn, tenant, form, dst, rte, count=10, url="http://127.0.0.1:9/", due=now
    )
    lease = timedelta(seconds=30)
    first = await outbox.claim_due(conn, now=now, limit=6, lease=lease, per_destination=20)
    second = await outbox.claim_due(conn, now=now, limit=6, lease=lease, per_destination=20)
    assert len(first) == 6 and len(second) == 4
    assert not {c.id for c in first} & {c.id for c in second}
    later = now + timedelta(seconds=29)
    assert await outbox.claim_due(conn, now=later, limit=20, lease=lease) == []
    again = await outbox.claim_due(
        conn, now=now + timedelta(seconds=31), limit=20, lease=lease, per_destination=20
    )
    assert {c.id for c in again} == {c.id for c in first + second}
    assert not {c.claim_token for c in again} & {c.claim_token for c in first + second}


async def test_finish__fenced_by_the_claim_token(conn: Conn) -> None:
    now = utcnow()
    tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
    dst, rte = await make_route_to(conn, tenant, form, config={"url": "http://127.0.0.1:9/"})
    _, dlv = await make_delivery(
        conn, tenant, form, dst, rte, target={"url": "http://127.0.0.1:9/"}
    )
    lease = timedelta(seconds=2)
    [old] = await outbox.claim_due(conn, now=now, limit=5, lease=lease)
    [new] = await outbox.claim_due(conn, now=now + timedelta(seconds=3), limit=5, lease=lease)
    attempt = outbox.Attempt(now, 10, 200, None, "ok")
    assert await outbox.finish(
        conn, [outbox.Outcome(new, now, "sent", reason=None, detail="sent", attempt=attempt)]
    ) == [True]
    assert await outbox.finish(
        conn, [outbox.Outcome(old, now, "dead", reason="http_404", detail="x", attempt=attempt)]
    ) == [False]
    row = await delivery(conn, dlv)
    # The lost lease's attempt counts (recorded `interrupted` by the second claim).
    assert (row["status"], row["attempts"], row["reason"]) == ("sent", 2, None)
    history = [(a["attempt"], a["outcome"], a["error_class"]) for a in await attempts(conn, dlv)]
    assert history == [(1, "failed", "interrupted"), (2, "sent", None), (1, "fenced", None)]
    # The fenced `dead` left nothing of a death.
    assert await dead_leaves(conn) == {"alerts": [], "events": [], "hooked": []}


async def test_finish__one_statement_writes_each_outcome_fenced_on_its_own(conn: Conn) -> None:
    now = utcnow()
    tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
    dst, rte = await make_route_to(conn, tenant, form, config={"url": "http://127.0.0.1:9/"})
    _, lost = await make_delivery(
        conn, tenant, form, dst, rte, target={"url": "http://127.0.0.1:9/"}
    )
    lease = timedelta(seconds=2)
    [old] = await outbox.claim_due(conn, now=now, limit=5, lease=lease)
    _, other = await make_delivery(
        conn, tenant, form, dst, rte, target={"url": "http://127.0.0.1:9/"}
    )
    later = now + timedelta(seconds=3)
    by_id = {c.id: c for c in await outbox.claim_due(conn, now=later, limit=5, lease=lease)}
    assert set(by_id) == {lost, other}
    sent = outbox.Attempt(now, 10, 200, None, "ok")
    won = await outbox.finish(
        conn,
        [
            outbox.Outcome(old, now, "dead", reason="http_404", detail="x", attempt=sent),
            outbox.Outcome(by_id[lost], later, "sent", None, "sent", attempt=sent),
            outbox.Outcome(
                by_id[other],
                later,
                "failed",
                None,
                "http_503",
                next_attempt_at=later + timedelta(minutes=1),
                attempt=outbox.Attempt(later, 5, 503, None, None),
            ),
        ],
    )
    assert won == [False, True, True]
    row = await delivery(conn, lost)
    assert (row["status"], row["attempts"], row["claim_token"]) == ("sent", 2, None)
    assert [a["outcome"] for a in await attempts(conn, lost)] == ["failed", "fenced", "sent"]
    row = await delivery(conn, other)
    assert (row["status"], row["attempts"], row["last_detail"]) == ("failed", 1, "http_503")
    assert row["next_attempt_at"] == later + timedelta(minutes=1)
    [attempt] = await attempts(conn, other)
    assert (attempt["outcome"], attempt["http_status"]) == ("failed", 503)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (
            'UPDATE submissions SET erased_at = now(), "values" = NULL,'
            " erase_reason = 'requested'",
            "values_erased",
        ),
        (
            "UPDATE submissions SET received_at = now() - interval '2 days',"
            " erase_at = now() - interval '1 day'",
            "values_expired",
        ),
        (
            "UPDATE destinations SET enabled = false, paused_reason = 'owner', paused_at = now()",
            "destination_paused",
        ),
        ("UPDATE destinations SET deleted_at = now()", "destination_removed"),
    ],
)
async def test_deliver__live_checks_skip(
    services: Services, conn: Conn, change: str, reason: str
) -> None:
    with receiver() as peer:
        tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
        dst, rte = await make_route_to(conn, tenant, form, config={"url": peer.url})
        _, dlv = await make_delivery(conn, tenant, form, dst, rte, target={"url": peer.url})
        await conn.execute(change)
        stats = await Deliverer(services, options=FAST).run_pass(now=utcnow(), budget=5)
    assert peer.requests == []
    assert stats["skipped"] == 1
    row = await delivery(conn, dlv)
    assert (row["status"], row["reason"], row["attempts"]) == ("skipped", reason, 0)
    assert await attempts(conn, dlv) == []


async def test_deliver__over_quota_is_held_then_released_by_an_upgrade(
    services: Services, conn: Conn
) -> None:
    now = utcnow()
    with receiver() as peer:
        tenant, form = await setup_form(conn, routes=0)
        dst, rte = await make_route_to(conn, tenant, form, config={"url": peer.url})
        await conn.execute(
            "INSERT INTO usage_counters (organization_id, month, submissions)"
            " VALUES (%(org)s, %(month)s, 101)",
            {"org": tenant.org, "month": month_of(now)},
        )
        _, within = await make_delivery(conn, tenant, form, dst, rte, target={"url": peer.url})
        _, over = await make_delivery(
            conn, tenant, form, dst, rte, target={"url": peer.url}, flags=["over_quota"]
        )
        stats = await Deliverer(services, options=FAST).run_pass(now=now, budget=5)
        assert (stats["sent"], stats["held"]) == (1, 1)
        row = await delivery(conn, over)
        assert (row["status"], row["held"], row["attempts"]) == ("pending", True, 0)
        assert (await delivery(conn, within))["status"] == "sent"
        # Still over quota: the next pass leaves it alone.
        stats = await Deliverer(services, options=FAST).run_pass(now=now, budget=5)
        assert stats.get("claimed", 0) == 0 and stats["released"] == 0
        await conn.execute(
            "UPDATE organizations SET plan = 'pro' WHERE id = %(org)s", {"org": tenant.org}
        )
        stats = await Deliverer(services, options=FAST).run_pass(now=now, budget=5)
    assert (stats["released"], stats["sent"]) == (1, 1)
    row = await delivery(conn, over)
    assert (row["status"], row["held"], row["attempts"]) == ("sent", False, 1)
    assert len(peer.requests) == 2


async def test_deliver__over_quota_released_by_a_new_month(services: Services, conn: Conn) -> None:
    now = utcnow()
    with receiver() as peer:
        tenant, form = await setup_form(conn, routes=0)
        dst, rte = await make_route_to(conn, tenant, form, config={"url": peer.url})
        await conn.execute(
            "INSERT INTO usage_counters (organization_id, month, submissions)"
            " VALUES (%(org)s, %(month)s, 500)",
            {"org": tenant.org, "month": month_of(now)},
        )
        _, over = await make_delivery(
            conn, tenant, form, dst, rte, target={"url": peer.url}, flags=["over_quota"]
        )
        await Deliverer(services, options=FAST).run_pass(now=now, budget=5)
        assert (await delivery(conn, over))["held"]
        next_month = (now.replace(day=1) + timedelta(days=32)).replace(day=1)
        stats = await Deliverer(services, options=FAST).run_pass(now=next_month, budget=5)
    assert stats["sent"] == 1
    assert len(peer.requests) == 1


async def test_deliver__storm_sends_one_probe_per_window(services: Services, conn: Conn) -> None:
    now = utcnow()
    with receiver(status(500)) as peer:
        tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
        dst, rte = await make_route_to(conn, tenant, form, config={"url": peer.url})
        await make_deliveries(conn, tenant, form, dst, rte, count=1000, url=peer.url, due=now)
        worker = Deliverer(services, options=FAST)
        stats = await worker.run_pass(now=now, budget=10)
        first = len(peer.requests)
        # Five failures make it failing; the sends already in flight (at most the
        # per-destination limit) finish, and nothing else goes out.
        assert 5 <= first <= 5 + FAST.per_destination
        cur = await conn.execute(
            "SELECT health, consecutive_failures, probe_after FROM destinations WHERE id = %(id)s",
            {"id": dst},
        )
        health = await cur.fetchone()
        assert health is not None and health["health"] == "failing"
        assert stats["failed"] == first and stats["throttled"] == 1000 - first
        cur = await conn.execute(
            "SELECT count(*) AS n FROM deliveries WHERE throttled AND attempts = 0"
        )
        assert (await cur.fetchone()) == {"n": 1000 - first}
        # Each window lets exactly one probe through: the deliveries in flight when it
        # turned failing come due, one probes, the others are parked behind it.
        for window in range(3):
            cur = await conn.execute(
                "SELECT max(next_attempt_at) AS due FROM deliveries"
                " WHERE status = 'failed' AND NOT throttled"
            )
            due = (await cur.fetchone() or {})["due"]
            stats = await worker.run_pass(now=due, budget=10)
            assert len(peer.requests) == first + window + 1, stats
            assert stats.get("probes") == 1
        cur = await conn.execute("SELECT health FROM destinations WHERE id = %(id)s", {"id": dst})
        assert await cur.fetchone() == {"health": "failing"}
        # The receiver recovers: one successful probe restores it and releases the rest.
        peer.respond = status(200)
        cur = await conn.execute(
            "SELECT next_attempt_at FROM deliveries WHERE status = 'failed' AND NOT throttled"
        )
        [probe] = await cur.fetchall()
        recovered_at = probe["next_attempt_at"]
        # A zero budget runs one batch: the probe (everything else is parked).
        stats = await worker.run_pass(now=recovered_at, budget=0)
    assert (stats["claimed"], stats["sent"], stats["unthrottled"]) == (1, 1, 999)
    cur = await conn.execute(
        "SELECT health, consecutive_failures, probe_after FROM destinations WHERE id = %(id)s",
        {"id": dst},
    )
    assert await cur.fetchone() == {
        "health": "healthy",
        "consecutive_failures": 0,
        "probe_after": None,
    }
    cur = await conn.execute(
        "SELECT count(*) AS n FROM deliveries"
        " WHERE status IN ('pending', 'failed') AND NOT throttled"
        " AND next_attempt_at <= %(at)s",
        {"at": recovered_at + timedelta(seconds=5)},
    )
    assert await cur.fetchone() == {"n": 999}
    assert len(peer.requests) == first + 4


async def test_deliver__probe_window_doubles_from_thirty_seconds_to_six_hours(
    services: Services, conn: Conn
) -> None:
    now = utcnow()

    async def window(pass_at: datetime) -> float:
        cur = await conn.execute(
            "SELECT probe_after FROM destinations WHERE id = %(id)s", {"id": dst}
        )
        row = await cur.fetchone()
        assert row is not None
        return round((row["probe_after"] - pass_at).total_seconds())

    async def probe_due() -> datetime:
        cur = await conn.execute(
            "SELECT max(next_attempt_at) AS due FROM deliveries"
            " WHERE status = 'failed' AND NOT throttled"
        )
        due: datetime = (await cur.fetchone() or {})["due"]
        return due

    with receiver(status(500)) as peer:
        tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
        dst, rte = await make_route_to(conn, tenant, form, config={"url": peer.url})
        await make_deliveries(conn, tenant, form, dst, rte, count=5, url=peer.url, due=now)
        worker = Deliverer(services, options=FAST)
        await worker.run_pass(now=now, budget=10)
        # The fifth failure in a row turns it failing: the first window is 30 s.
        windows = [await window(now)]
        # Each failed probe opens the next window, twice as long.
        for _ in range(2):
            due = await probe_due()
            stats = await worker.run_pass(now=due, budget=10)
            assert stats.get("probes") == 1
            windows.append(await window(due))
        # However many probes failed, a window lasts 6 h at most.
        await conn.execute(
            "UPDATE destinations SET consecutive_failures = 40 WHERE id = %(id)s", {"id": dst}
        )
        due = await probe_due()
        await worker.run_pass(now=due, budget=10)
        windows.append(await window(due))
    assert windows == [30, 60, 120, 6 * 3600]
