"""Destinations that pause themselves, their deliveries waiting, resume and replay, and the
owner's own pause: through /v1, a real loopback receiver, a real SMTP peer, and the ticks run
at times moved back a day (no sleeping)."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta
from email.parser import BytesParser
from email.policy import default as default_policy
from typing import Any

from aiosmtpd.smtp import Envelope

from core.outbox.worker import Deliverer, WorkerOptions
from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from core.ticks.retention import run_retention
from tests.support.api import api_client, assert_problem
from tests.support.builders import make_deliveries, make_delivery, make_route_to, setup_form
from tests.support.dashboard import dashboard_client, sign_in
from tests.support.peers import Answer, Request, receiver
from tests.support.records import rows
from tests.support.settings import SENDER, with_settings

FAST = WorkerOptions(timeout=2, margin=0.1)
OWNER = "ops@example.com"


def _subjects(received: list[Envelope]) -> list[str]:
    subjects = []
    for envelope in received:
        assert isinstance(envelope.content, bytes)
        subjects.append(
            str(BytesParser(policy=default_policy).parsebytes(envelope.content)["Subject"])
        )
    return subjects


async def _statuses(conn: Conn, destination: str) -> Counter[str]:
    found = await rows(
        conn, "SELECT status FROM deliveries WHERE destination_id = %(d)s", d=destination
    )
    return Counter(row["status"] for row in found)


async def _pass(services: Services, at: datetime) -> dict[str, Any]:
    return await Deliverer(services, options=FAST).run_pass(now=at, budget=5)


async def test_pauses__failing_for_its_window_it_pauses_deliveries_wait_resume_sends_them(
    services: Services, conn: Conn, smtp_server: tuple[str, list[Envelope]]
) -> None:
    url, received = smtp_server
    mail = with_settings(services, email_provider="smtp", mail_from=SENDER, smtp_url=url)
    now = utcnow()
    start = now - timedelta(hours=25)
    gone: list[str] = []

    def failing(request: Request) -> Answer:
        # One delivery is refused for good (dead at once); the rest fail and are retried.
        if request.headers.get("X-Postbag-Delivery") in gone:
            return 410, {}, b"gone"
        return 500, {}, b"down"

    with receiver(failing) as peer:
        tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
        dst, rte = await make_route_to(conn, tenant, form, config={"url": peer.url})
        await make_deliveries(conn, tenant, form, dst, rte, count=11, url=peer.url, due=start)
        # Due first, so it is among the sends before the breaker trips.
        _, refused_for_good = await make_delivery(
            conn,
            tenant,
            form,
            dst,
            rte,
            target={"url": peer.url},
            next_attempt_at=start - timedelta(minutes=1),
        )
        gone.append(refused_for_good)
        async with api_client(mail, tenant.key) as api:
            told = await api.patch("/v1/organization", json={"notify": [OWNER]})
            assert told.json()["notify"] == [OWNER], told.text
            windowed = await api.patch(
                f"/v1/destinations/{dst}", json={"pause_after": {"hours": 24, "attempts": 5}}
            )
            assert windowed.json()["pause_after"] == {"hours": 24, "attempts": 5}
            # A day and an hour ago the receiver broke: the storm breaker turns it `failing`
            # and sends one probe per window; the retention tick notes since when.
            await _pass(mail, start)
            await run_retention(mail, now=start + timedelta(minutes=2), budget=10)
            for hour in range(2, 25, 2):
                await _pass(mail, start + timedelta(hours=hour))
            still = (await api.get(f"/v1/destinations/{dst}")).json()
            assert (still["enabled"], still["health"]) == (True, "failing")
            attempted = len(peer.requests)

            stats = await run_retention(mail, now=now, budget=10)
            assert stats["destinations_paused"] == 1, stats
            paused = (await api.get(f"/v1/destinations/{dst}")).json()
            assert (paused["enabled"], paused["paused_reason"], paused["health"]) == (
                False,
                "failing",
                "paused",
            )
            events = (await api.get("/v1/events")).json()["data"]
            [event] = [e for e in events if e["type"] == "destination.paused"]
            assert (event["subject"], event["data"]["reason"]) == (dst, "failing")

            # While paused nothing is sent: due deliveries wait (attempts unspent), even one
            # whose crashed claim spent its last attempt; none ends dead meanwhile.
            crashed = f"dlv_{rte}_2"
            await conn.execute(
                "UPDATE deliveries SET status = 'sending', attempts = max_attempts,"
                " claim_token = gen_random_uuid(), claimed_until = %(at)s WHERE id = %(id)s",
                {"id": crashed, "at": now - timedelta(minutes=1)},
            )
            await conn.execute(
                "UPDATE deliveries SET next_attempt_at = %(at)s"
                " WHERE destination_id = %(d)s AND status IN ('pending', 'failed')",
                {"d": dst, "at": now - timedelta(seconds=1)},
            )
            await _pass(mail, now)
            await _pass(mail, now + timedelta(hours=7))
            assert len(peer.requests) == attempted
            assert (await _statuses(conn, dst))["dead"] == 1
            waiting = await rows(
                conn,
                "SELECT id, status, attempts, last_detail FROM deliveries"
                " WHERE destination_id = %(d)s AND status <> 'dead' ORDER BY id",
                d=dst,
            )
            assert len(waiting) == 11
            assert {row["status"] for row in waiting} <= {"pending", "failed"}
            [last] = [row for row in waiting if row["id"] == crashed]
            assert (last["status"], last["attempts"], last["last_detail"]) == (
                "failed",
                10,
                "destination_paused",
            )
            refused = await api.post(f"/v1/deliveries/{refused_for_good}/retry")
            assert_problem(refused, 409, "destination_paused")

            # The owner was told twice, each once: the first dead delivery of the storm and
            # the pause.
            assert [envelope.rcpt_tos for envelope in received] == [[OWNER], [OWNER]]
            assert sorted(_subjects(received)) == [
                "Deliveries to “Hook” are failing",
                "Postbag paused the destination “Hook”",
            ]

            # Resumed: what waited is sent at once, and the answer counts what went dead.
            peer.respond = lambda _r: (200, {}, b"ok")
            resumed = await api.patch(f"/v1/destinations/{dst}", json={"enabled": True})
            body = resumed.json()
            # The breaker starts afresh (the day's numbers still say `failing`).
            assert (body["enabled"], body["paused_reason"], body["throttled"]) == (
                True,
                None,
                False,
            )
            assert body["replay"]["count"] == 1
            assert body["replay"]["filter"]["status"] == ["dead", "skipped"]
            await _pass(mail, utcnow())
            # The one whose attempts a crash spent before the pause ends dead now, as it
            # would have without the pause; the replay sends both.
            assert await _statuses(conn, dst) == Counter(sent=10, dead=2)
            replayed = await api.post("/v1/deliveries/replay", json=body["replay"]["filter"])
            assert replayed.status_code == 202, replayed.text
            assert replayed.json()["total"] == 2
            await _pass(mail, utcnow() + timedelta(seconds=1))
    assert await _statuses(conn, dst) == Counter(sent=12)
    delivered = [
        r.headers["X-Postbag-Delivery"]
        for r, code in zip(peer.requests, peer.answered, strict=True)
        if code == 200
    ]
    expected = [refused_for_good, *(f"dlv_{rte}_{n}" for n in range(1, 12))]
    assert sorted(delivered) == sorted(expected)  # each once
    assert len(received) == 2  # resuming tells no one


async def test_pauses__the_owners_pause_skips_and_resume_offers_to_send_again(
    services: Services, conn: Conn
) -> None:
    with receiver() as peer:
        tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
        dst, rte = await make_route_to(conn, tenant, form, config={"url": peer.url})
        async with api_client(services, tenant.key) as api:
            off = (await api.patch(f"/v1/destinations/{dst}", json={"enabled": False})).json()
            assert (off["enabled"], off["paused_reason"], off["health"]) == (
                False,
                "owner",
                "paused",
            )
            assert off["paused_at"] is not None and off["replay"] is None
            await make_deliveries(conn, tenant, form, dst, rte, count=2, url=peer.url, due=utcnow())
            await _pass(services, utcnow())
            assert await _statuses(conn, dst) == Counter(skipped=2)
            # Never paused itself, whatever the failures: the owner's reason stands.
            assert (await run_retention(services, now=utcnow(), budget=10))[
                "destinations_paused"
            ] == 0
            on = (await api.patch(f"/v1/destinations/{dst}", json={"enabled": True})).json()
            assert (on["enabled"], on["paused_reason"], on["paused_at"]) == (True, None, None)
            assert on["replay"]["count"] == 2
            again = await api.post("/v1/deliveries/replay", json=on["replay"]["filter"])
            assert again.json()["total"] == 2, again.text
            await _pass(services, utcnow() + timedelta(seconds=1))
            assert await _statuses(conn, dst) == Counter(sent=2)
            # Turning on a destination that is on changes nothing and offers nothing.
            same = (await api.patch(f"/v1/destinations/{dst}", json={"enabled": True})).json()
            assert same["replay"] is None
    assert len(peer.requests) == 2


async def test_pauses__a_bad_window_is_refused_and_changes_nothing(
    services: Services, conn: Conn
) -> None:
    tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
    dst, _ = await make_route_to(conn, tenant, form, config={"url": "http://127.0.0.1:9/h"})
    async with api_client(services, tenant.key) as api:
        for bad in ({"hours": 0}, {"attempts": 0}, {"hours": 721}, {"days": 1}, {"hours": "x"}):
            answer = await api.patch(
                f"/v1/destinations/{dst}", json={"name": "Renamed", "pause_after": bad}
            )
            assert_problem(answer, 422, "invalid_input")
        kept = (await api.get(f"/v1/destinations/{dst}")).json()
    assert (kept["name"], kept["pause_after"]) == ("Hook", {"hours": 24, "attempts": 10})


async def test_pauses__turned_on_in_the_dashboard_it_offers_to_send_again_with_the_count(
    services: Services, conn: Conn
) -> None:
    tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
    url = "https://example.com/h"
    dst, rte = await make_route_to(conn, tenant, form, config={"url": url})
    await make_deliveries(conn, tenant, form, dst, rte, count=3, url=url, due=utcnow())
    # It paused itself an hour ago, after a day in which one delivery went dead; the other
    # two wait, parked.
    paused_at = utcnow() - timedelta(hours=1)
    await conn.execute(
        "UPDATE destinations SET enabled = false, paused_reason = 'failing',"
        " paused_at = %(at)s, health = 'failing', consecutive_failures = 12"
        " WHERE id = %(d)s",
        {"d": dst, "at": paused_at},
    )
    await conn.execute(
        "UPDATE deliveries SET status = 'dead', reason = 'http_410', attempts = 1"
        " WHERE id = %(id)s",
        {"id": f"dlv_{rte}_1"},
    )
    await conn.execute(
        "UPDATE deliveries SET throttled = true, next_attempt_at = now() + interval '5 hours'"
        " WHERE route_id = %(r)s AND status = 'pending'",
        {"r": rte},
    )
    async with dashboard_client(services) as client:
        token = await sign_in(client, tenant.key)
        listing = (await client.get("/app/destinations")).text
        turned_on = await client.post(
            f"/app/destinations/{dst}", data={"csrf": token, "enabled": "on"}
        )
        offered = await client.get(turned_on.headers["location"])
    assert "paused itself: every attempt failed for 24 h" in listing
    since = (paused_at - timedelta(hours=24)).date().isoformat()
    assert turned_on.headers["location"] == f"/app/destinations/{dst}/replay?resumed={since}"
    assert "what waited for it is being sent now" in offered.text
    assert "1 deliveries match" in offered.text and "Send 1 again" in offered.text
    waiting = await rows(
        conn,
        "SELECT throttled, next_attempt_at <= now() AS due FROM deliveries"
        " WHERE route_id = %(r)s AND status = 'pending'",
        r=rte,
    )
    assert waiting == [{"throttled": False, "due": True}] * 2


async def test_pauses__resume_sends_every_waiting_delivery_the_former_probe_too(
    services: Services, conn: Conn
) -> None:
    with receiver() as peer:
        tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
        dst, rte = await make_route_to(conn, tenant, form, config={"url": peer.url})
        await make_deliveries(conn, tenant, form, dst, rte, count=8, url=peer.url, due=utcnow())
        # It paused itself while failing: seven deliveries parked behind its probe, and the
        # probe itself failed, so its backoff put it two hours out.
        await conn.execute(
            "UPDATE destinations SET enabled = false, paused_reason = 'failing',"
            " paused_at = now(), health = 'failing', consecutive_failures = 9,"
            " probe_after = now() + interval '2 hours' WHERE id = %(d)s",
            {"d": dst},
        )
        await conn.execute(
            "UPDATE deliveries SET throttled = true, next_attempt_at = now() + interval '6 hours',"
            " last_detail = 'destination_paused' WHERE route_id = %(r)s",
            {"r": rte},
        )
        await conn.execute(
            "UPDATE deliveries SET throttled = false, status = 'failed', attempts = 4,"
            " next_attempt_at = now() + interval '2 hours' WHERE id = %(id)s",
            {"id": f"dlv_{rte}_1"},
        )
        async with api_client(services, tenant.key) as api:
            resumed = await api.patch(f"/v1/destinations/{dst}", json={"enabled": True})
            assert resumed.json()["enabled"] is True, resumed.text
        await _pass(services, utcnow())
    assert await _statuses(conn, dst) == Counter(sent=8)
    assert len(peer.requests) == 8


async def test_pauses__send_again_in_the_dashboard_matches_the_waiting_deliveries(
    services: Services, conn: Conn
) -> None:
    tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
    url = "https://example.com/h"
    dst, rte = await make_route_to(conn, tenant, form, config={"url": url})
    await make_deliveries(conn, tenant, form, dst, rte, count=3, url=url, due=utcnow())
    # Failing: two deliveries parked behind the probe, the probe waiting out its backoff.
    await conn.execute(
        "UPDATE destinations SET health = 'failing', consecutive_failures = 9,"
        " probe_after = now() + interval '2 hours' WHERE id = %(d)s",
        {"d": dst},
    )
    await conn.execute(
        "UPDATE deliveries SET throttled = true, next_attempt_at = now() + interval '6 hours'"
        " WHERE route_id = %(r)s",
        {"r": rte},
    )
    await conn.execute(
        "UPDATE deliveries SET throttled = false, status = 'failed', attempts = 4"
        " WHERE id = %(id)s",
        {"id": f"dlv_{rte}_1"},
    )
    async with dashboard_client(services) as client:
        await sign_in(client, tenant.key)
        offered = (await client.get(f"/app/destinations/{dst}/replay")).text
        token = await sign_in(client, tenant.key)
        since = (utcnow() - timedelta(days=1)).date().isoformat()
        counted = await client.post(
            f"/app/destinations/{dst}/replay",
            data={"csrf": token, "since": since, "status": ["dead", "failed"], "action": "count"},
        )
    assert 'value="failed" checked' in offered
    assert "3 deliveries match" in counted.text, counted.text
