from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from standardwebhooks import Webhook

from core.outbox.worker import Deliverer, WorkerOptions
from core.platform.db import Conn
from core.platform.services import Services
from core.ticks.digests import DigestOptions, run_digests
from tests.support.builders import (
    WEBHOOK_SECRET,
    Tenant,
    make_destination,
    make_form,
    make_route,
    make_route_to,
    make_submission,
    make_tenant,
    setup_form,
)
from tests.support.peers import hex_signature_matches, receiver
from tests.support.submit import submit_client

DAY1 = datetime(2027, 3, 1, tzinfo=UTC)


async def _digest_route(
    conn: Conn,
    tenant: Tenant,
    form: str,
    *,
    url: str = "https://example.com/h",
    period: str = "daily",
) -> tuple[str, str]:
    dst, rte = await make_route_to(conn, tenant, form, config={"url": url})
    await conn.execute(
        "UPDATE routes SET mode = 'digest', period = %(period)s, updated_at = %(at)s"
        " WHERE id = %(rte)s",
        {"rte": rte, "period": period, "at": DAY1},
    )
    return dst, rte


async def _submit(
    conn: Conn,
    tenant: Tenant,
    form: str,
    at: datetime,
    values: dict[str, Any] | None = None,
    **cols: Any,
) -> str:
    erased = cols.get("erased_at") is not None
    return await make_submission(
        conn,
        tenant,
        form,
        None if erased else values or {"n": 1},
        received_at=at,
        erase_reason="requested" if erased else None,
        **cols,
    )


async def _digests(conn: Conn, rte: str) -> list[dict[str, Any]]:
    cur = await conn.execute(
        "SELECT g.period_key, g.submission_count, d.kind, d.channel, d.payload, d.status"
        " FROM digests g JOIN deliveries d ON d.digest_id = g.id"
        " WHERE g.route_id = %(rte)s ORDER BY g.period_start",
        {"rte": rte},
    )
    return [dict(row) for row in await cur.fetchall()]


async def test_digest__three_days_give_three_digests_and_reruns_nothing(
    services: Services, conn: Conn
) -> None:
    tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
    _, rte = await _digest_route(conn, tenant, form)
    for day in range(3):
        for hour in (9, 17):
            await _submit(conn, tenant, form, DAY1 + timedelta(days=day, hours=hour))
    # Spam is not in the route's statuses: neither counted nor listed.
    await _submit(conn, tenant, form, DAY1 + timedelta(hours=10), status="spam", reason="honeypot")
    # Today's period is still open.
    await _submit(conn, tenant, form, DAY1 + timedelta(days=3, hours=1))
    now = DAY1 + timedelta(days=3, hours=2)
    stats = await run_digests(services, now=now, budget=10)
    assert stats["digests"] == 3
    rows = await _digests(conn, rte)
    assert [(r["period_key"], r["submission_count"]) for r in rows] == [
        ("2027-03-01", 2),
        ("2027-03-02", 2),
        ("2027-03-03", 2),
    ]
    first = rows[0]
    assert (first["kind"], first["channel"], first["status"]) == ("digest", "webhook", "pending")
    payload = first["payload"]
    assert payload["event"] == "form.digest"
    assert payload["form"] == form
    assert payload["period"] == "2027-03-01"
    assert payload["period_start"] == "2027-03-01T00:00:00.000Z"
    assert payload["period_end"] == "2027-03-02T00:00:00.000Z"
    assert payload["count"] == 2
    assert [s["submitted_at"] for s in payload["submissions"]] == [
        "2027-03-01T09:00:00.000Z",
        "2027-03-01T17:00:00.000Z",
    ]
    assert payload["submissions"][0]["values"] == {"n": 1}
    assert payload["more_url"].startswith("http://127.0.0.1:8080/v1/submissions?form=frm_")
    again = await run_digests(services, now=now, budget=10)
    assert again.get("digests", 0) == 0
    assert len(await _digests(conn, rte)) == 3


async def test_digest__concurrent_passes_make_no_duplicate(services: Services, conn: Conn) -> None:
    tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
    _, rte = await _digest_route(conn, tenant, form, period="hourly")
    for hour in range(6):
        await _submit(conn, tenant, form, DAY1 + timedelta(hours=hour, minutes=5))
    now = DAY1 + timedelta(hours=7)
    results = await asyncio.gather(*(run_digests(services, now=now, budget=10) for _ in range(2)))
    assert sum(r.get("digests", 0) for r in results) == 6
    keys = [r["period_key"] for r in await _digests(conn, rte)]
    assert keys == [f"2027-03-01T{h:02d}" for h in range(6)]
    cur = await conn.execute(
        "SELECT count(*) AS n FROM deliveries WHERE kind = 'digest' AND route_id = %(rte)s",
        {"rte": rte},
    )
    assert (await cur.fetchone() or {})["n"] == 6


async def test_digest__empty_period_and_erased_values(services: Services, conn: Conn) -> None:
    tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
    _, rte = await _digest_route(conn, tenant, form)
    # Day 1 empty; day 2 one readable, one erased, one expired.
    day2 = DAY1 + timedelta(days=1)
    await _submit(conn, tenant, form, day2 + timedelta(hours=1), {"name": "Ada"})
    await _submit(
        conn, tenant, form, day2 + timedelta(hours=2), erased_at=day2 + timedelta(hours=3)
    )
    await _submit(
        conn,
        tenant,
        form,
        day2 + timedelta(hours=4),
        {"name": "Old"},
        erase_at=day2 + timedelta(hours=5),
    )
    stats = await run_digests(services, now=DAY1 + timedelta(days=2, minutes=5), budget=10)
    assert stats["digests"] == 1
    [row] = await _digests(conn, rte)
    assert (row["period_key"], row["submission_count"]) == ("2027-03-02", 3)
    listed = row["payload"]["submissions"]
    assert [s.get("values") for s in listed] == [{"name": "Ada"}, None, None]
    assert all("receipt" in s for s in listed)


async def test_digest__catches_up_after_a_gap_oldest_first_bounded_per_pass(
    services: Services, conn: Conn
) -> None:
    tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
    _, rte = await _digest_route(conn, tenant, form)
    await _submit(conn, tenant, form, DAY1 + timedelta(hours=1))
    assert (await run_digests(services, now=DAY1 + timedelta(days=1, minutes=1), budget=10))[
        "digests"
    ] == 1
    # Down for three days, with submissions on each.
    for day in (1, 2, 3):
        await _submit(conn, tenant, form, DAY1 + timedelta(days=day, hours=12))
    now = DAY1 + timedelta(days=4, hours=1)
    stats = await run_digests(
        services, now=now, budget=10, options=DigestOptions(periods_per_route=2)
    )
    assert stats["digests"] == 2
    keys = [r["period_key"] for r in await _digests(conn, rte)]
    assert keys == ["2027-03-01", "2027-03-02", "2027-03-03"]
    stats = await run_digests(services, now=now, budget=10)
    assert stats["digests"] == 1
    keys = [r["period_key"] for r in await _digests(conn, rte)]
    assert keys == ["2027-03-01", "2027-03-02", "2027-03-03", "2027-03-04"]


async def test_digest__webhook_verifies_with_both_signature_schemes(
    services: Services, conn: Conn
) -> None:
    with receiver() as peer:
        tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
        _, rte = await _digest_route(conn, tenant, form, url=peer.url + "/digest")
        await _submit(conn, tenant, form, DAY1 + timedelta(hours=3), {"email": "a@example.com"})
        now = DAY1 + timedelta(days=1, minutes=1)
        assert (await run_digests(services, now=now, budget=10))["digests"] == 1
        stats = await Deliverer(services, options=WorkerOptions(timeout=2, margin=0.1)).run_pass(
            now=now, budget=10
        )
    assert stats["sent"] == 1
    [request] = peer.requests
    headers = {k.lower(): v for k, v in request.headers.items()}
    assert headers["x-postbag-event"] == "form.digest"
    body = json.loads(request.body)
    assert body["event"] == "form.digest" and body["count"] == 1
    assert "text" not in body
    assert hex_signature_matches(WEBHOOK_SECRET, request.body, headers["x-postbag-signature"])
    assert Webhook(WEBHOOK_SECRET).verify(request.body, request.headers) == body
    assert (await _digests(conn, rte))[0]["status"] == "sent"


async def test_digest__email_text(services: Services, conn: Conn) -> None:
    tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
    _, rte = await make_route_to(
        conn, tenant, form, type="email", config={"to": ["owner@example.com"]}, secrets=()
    )
    await conn.execute(
        "UPDATE routes SET mode = 'digest', period = 'weekly', updated_at = %(at)s"
        " WHERE id = %(rte)s",
        {"rte": rte, "at": DAY1},
    )
    for n in range(3):
        await _submit(conn, tenant, form, DAY1 + timedelta(hours=n))
    await run_digests(services, now=DAY1 + timedelta(days=8), budget=10)
    [row] = await _digests(conn, rte)
    assert row["channel"] == "email"
    assert row["period_key"] == "2027-W09"
    assert row["payload"]["subject"] == "3 new submissions to Contact (2027-W09)"
    assert row["payload"]["text"].startswith("3 new submissions to Contact (2027-W09)\n")


async def test_digest__submit_plans_no_immediate_delivery_for_a_digest_route(
    services: Services, conn: Conn
) -> None:
    tenant = await make_tenant(conn)
    form = await make_form(conn, tenant)
    await make_route(
        conn, tenant, form, await make_destination(conn, tenant), mode="digest", period="daily"
    )
    async with submit_client(services) as client:
        response = await client.post(
            f"/s/{form}", data={"name": "Ada"}, headers={"Accept": "application/json"}
        )
    assert response.status_code == 201
    cur = await conn.execute("SELECT count(*) AS n FROM deliveries")
    assert (await cur.fetchone() or {})["n"] == 0


async def test_digest__a_later_erase_scrubs_the_digest_snapshot(
    services: Services, conn: Conn
) -> None:
    from core.submissions.erasure import erase_many

    tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
    _, rte = await _digest_route(conn, tenant, form)
    kept = await _submit(conn, tenant, form, DAY1 + timedelta(hours=1), {"name": "Ada"})
    gone = await _submit(conn, tenant, form, DAY1 + timedelta(hours=2), {"name": "Bob"})
    now = DAY1 + timedelta(days=1, minutes=1)
    await run_digests(services, now=now, budget=10)
    async with conn.transaction():
        await erase_many(conn, ids=[gone], now=now, reason="requested")
    [row] = await _digests(conn, rte)
    assert row["payload"]["submissions"] == [
        {"receipt": kept, "submitted_at": "2027-03-01T01:00:00.000Z", "values": {"name": "Ada"}},
        {"receipt": gone, "submitted_at": "2027-03-01T02:00:00.000Z"},
    ]
    assert row["payload"]["count"] == 2
