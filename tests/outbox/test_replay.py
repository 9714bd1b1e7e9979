"""Bulk replay through `/v1`: after a receiver's outage, its dead deliveries are queued again
with their original ids, at the asked rate, never those erased or marked spam since."""

from __future__ import annotations

import itertools
import time
from datetime import datetime, timedelta

from core.outbox.worker import Deliverer
from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from tests.support.api import api_client
from tests.support.builders import (
    make_deliveries,
    make_delivery,
    make_route_to,
    make_tenant,
    setup_form,
)
from tests.support.dashboard import dashboard_client, sign_in
from tests.support.peers import receiver
from tests.support.records import rows

COUNT = 500


async def _dead(conn: Conn, route: str) -> None:
    """The receiver was down: every delivery of `route` ended dead."""
    await conn.execute(
        "UPDATE deliveries SET status = 'dead', reason = 'attempts_exhausted', attempts = 10,"
        " last_detail = 'http_503' WHERE route_id = %(route)s",
        {"route": route},
    )


async def test_replay__the_dead_deliveries_of_an_outage_arrive_once_each_at_the_rate(
    services: Services, conn: Conn
) -> None:
    tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
    with receiver() as peer:
        url = peer.url + "/hook"
        dst, rte = await make_route_to(conn, tenant, form, config={"url": url})
        start = utcnow()
        await make_deliveries(
            conn, tenant, form, dst, rte, count=COUNT, url=url, due=start - timedelta(hours=1)
        )
        erased, _ = await make_delivery(conn, tenant, form, dst, rte, target={"url": url})
        spam, _ = await make_delivery(conn, tenant, form, dst, rte, target={"url": url})
        await _dead(conn, rte)
        other, other_form = await setup_form(conn, name="Other", plan="self_hosted", routes=0)
        o_dst, o_rte = await make_route_to(conn, other, other_form, config={"url": url})
        await make_deliveries(conn, other, other_form, o_dst, o_rte, count=3, url=url, due=start)
        await _dead(conn, o_rte)
        since = (start - timedelta(days=1)).isoformat()
        filter_ = {"destination": dst, "status": ["dead"], "since": since}
        async with api_client(services, tenant.key) as api:
            assert (await api.post(f"/v1/submissions/{erased}/erase")).status_code == 200
            assert (await api.post(f"/v1/submissions/{spam}/spam")).status_code == 200
            counted = await api.post("/v1/deliveries/replay", json={**filter_, "dry_run": True})
            started = await api.post("/v1/deliveries/replay", json={**filter_, "per_second": 50})
        assert counted.status_code == 200, counted.text
        assert counted.json()["count"] == COUNT
        assert started.status_code == 202, started.text
        replay = started.json()
        assert (replay["total"], replay["queued"], replay["sent"]) == (COUNT, COUNT, 0)

        due = await rows(
            conn,
            "SELECT next_attempt_at FROM deliveries WHERE replay_id = %(r)s"
            " ORDER BY next_attempt_at",
            r=replay["id"],
        )
        gaps = {(b["next_attempt_at"] - a["next_attempt_at"]) for a, b in itertools.pairwise(due)}
        assert gaps == {timedelta(milliseconds=20)}  # 50 a second

        now, began = utcnow(), time.monotonic()
        first = await Deliverer(services).run_pass(now=now, budget=30)
        since_replay = (now - datetime.fromisoformat(replay["created_at"])).total_seconds()
        took = since_replay + time.monotonic() - began
        # What came due since the replay began, 50 a second (the pass's clock runs on).
        assert 1 <= first["sent"] <= 2 + 50 * took, (first, took)
        rest = await Deliverer(services).run_pass(now=now + timedelta(seconds=11), budget=60)
        assert first["sent"] + rest.get("sent", 0) == COUNT, rest
        async with api_client(services, tenant.key) as api:
            progress = (await api.get(f"/v1/replays/{replay['id']}")).json()
            other_view = await api.get(f"/v1/replays/{replay['id']}", headers=other.headers)
    assert (progress["sent"], progress["queued"], progress["failed"]) == (COUNT, 0, 0)
    assert other_view.status_code == 404
    async with api_client(services, other.key) as api:
        foreign = await api.post(
            "/v1/deliveries/replay", json={"destination": dst, "since": since, "dry_run": True}
        )
    assert foreign.status_code == 404, foreign.text
    delivered = [request.headers["X-Postbag-Delivery"] for request in peer.requests]
    assert len(delivered) == len(set(delivered)) == COUNT
    assert set(delivered) == {f"dlv_{rte}_{n}" for n in range(1, COUNT + 1)}
    # The other organization's dead deliveries were neither counted nor queued.
    [left] = await rows(
        conn,
        "SELECT count(*) AS n FROM deliveries WHERE route_id = %(r)s AND status = 'dead'",
        r=o_rte,
    )
    assert left["n"] == 3


async def test_replay__refuses_a_bad_filter_with_a_problem(services: Services, conn: Conn) -> None:
    acme = await make_tenant(conn)
    async with api_client(services, acme.key) as api:
        answers = [
            await api.post("/v1/deliveries/replay", json=body)
            for body in (
                {"status": ["dead"]},  # no since
                {"since": "2026-01-02T00:00:00Z", "until": "2026-01-01T00:00:00Z"},
                {"since": "2026-01-01T00:00:00Z", "status": ["sent"]},
                {"since": "2026-01-01T00:00:00Z", "destination": "../keys"},
                {"since": "2026-01-01T00:00:00Z", "per_second": 500},
            )
        ]
    assert [a.status_code for a in answers] == [422] * 5
    assert all(a.headers["content-type"].startswith("application/problem+json") for a in answers)


async def test_replay__send_again_from_the_dashboard_counts_then_confirms(
    services: Services, conn: Conn
) -> None:
    tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
    url = "https://example.com/h"
    dst, rte = await make_route_to(conn, tenant, form, config={"url": url})
    await make_deliveries(conn, tenant, form, dst, rte, count=12, url=url, due=utcnow())
    await _dead(conn, rte)
    async with dashboard_client(services) as client:
        token = await sign_in(client, tenant.key)
        listing = (await client.get("/app/destinations")).text
        opened = await client.get(f"/app/destinations/{dst}/replay")
        asked = {"csrf": token, "status": "dead", "since": utcnow().date().isoformat()}
        counted = await client.post(
            f"/app/destinations/{dst}/replay", data={**asked, "action": "count"}
        )
        queued_before = await rows(conn, "SELECT id FROM deliveries WHERE status = 'pending'")
        confirmed = await client.post(
            f"/app/destinations/{dst}/replay", data={**asked, "action": "confirm"}
        )
        forged = await client.post(
            f"/app/destinations/{dst}/replay", data={**asked, "csrf": "x", "action": "confirm"}
        )
    assert f'href="/app/destinations/{dst}/replay"' in listing
    assert opened.status_code == 200 and 'name="since"' in opened.text
    assert "12 deliveries match" in counted.text and "Send 12 again" in counted.text
    assert queued_before == []
    assert confirmed.status_code == 200 and "Queued 12 deliveries again" in confirmed.text
    pending = await rows(conn, "SELECT id FROM deliveries WHERE status = 'pending'")
    assert len(pending) == 12
    assert forged.status_code in (403, 422)
    [replay] = await rows(conn, "SELECT total FROM replays")
    assert replay["total"] == 12


async def test_replay__of_a_failing_destination_probes_at_once_and_keeps_its_rate(
    services: Services, conn: Conn
) -> None:
    tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
    with receiver() as peer:
        dst, rte = await make_route_to(conn, tenant, form, config={"url": peer.url})
        start = utcnow()
        await make_deliveries(
            conn, tenant, form, dst, rte, count=29, url=peer.url, due=start - timedelta(hours=1)
        )
        await _dead(conn, rte)
        # The breaker still holds it `failing`, its next probe ten minutes out; the receiver
        # is back (the peer answers 200).
        await conn.execute(
            "UPDATE destinations SET health = 'failing', consecutive_failures = 9,"
            " probe_after = now() + interval '10 minutes' WHERE id = %(d)s",
            {"d": dst},
        )
        since = (start - timedelta(days=1)).isoformat()
        filter_ = {"destination": dst, "status": ["dead"], "since": since}
        async with api_client(services, tenant.key) as api:
            started = await api.post("/v1/deliveries/replay", json=filter_)
            assert started.status_code == 202, started.text
            replay = started.json()
            # The first replayed delivery is due at once and probes; the rest keep the
            # replay's rate (10 a second) behind it.
            now = datetime.fromisoformat(replay["created_at"])
            first = await Deliverer(services).run_pass(now=now, budget=10)
            assert first.get("sent", 0) >= 1, first
            assert (await api.get(f"/v1/destinations/{dst}")).json()["health"] != "failing"
            # Then at the replay's pace: all of it due within 3 s (well inside 90 s).
            for _ in range(5):
                await Deliverer(services).run_pass(now=now + timedelta(seconds=3), budget=10)
            done = (await api.get(f"/v1/replays/{replay['id']}")).json()
    assert (done["sent"], done["queued"]) == (29, 0), done
    assert len(peer.requests) == 29
