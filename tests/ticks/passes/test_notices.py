"""The owner's notice emails (core/owner/notifications.py): gathered and folded by the
notices pass of the retention tick, sent by the outbox through a real SMTP peer; at most
one per kind per hour, the rest in one digest when the hour ends; none without an address.
The same notices to a chosen webhook destination (never the one they are about), set and
listed on the Alerts page."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timedelta
from email.message import EmailMessage
from email.parser import BytesParser
from email.policy import default as default_policy

from aiosmtpd.smtp import Envelope

from core.outbox.pauses import pause_failing
from core.outbox.worker import Deliverer, WorkerOptions
from core.owner.notifications import send_due
from core.platform.clock import month_of, utcnow
from core.platform.db import Conn
from core.platform.services import Services
from core.ticks.passes.history import HISTORY_DAYS
from core.ticks.retention import run_retention
from tests.support.api import api_client, assert_problem, error_fields
from tests.support.builders import (
    Tenant,
    add_attempt,
    make_delivery,
    make_destination,
    make_route_to,
    setup_form,
)
from tests.support.dashboard import dashboard_client, sign_in
from tests.support.peers import receiver, status
from tests.support.records import rows
from tests.support.settings import SENDER, with_settings
from tests.support.spam import JSON_ACCEPT
from tests.support.submit import submit_client

FAST = WorkerOptions(timeout=2, margin=0.1)
OWNER = "ops@example.com"


def _parsed(received: list[Envelope]) -> list[EmailMessage]:
    found = []
    for envelope in received:
        assert isinstance(envelope.content, bytes)
        found.append(BytesParser(policy=default_policy).parsebytes(envelope.content))
    return found


async def _tick(services: Services, at: datetime) -> None:
    """The retention tick at `at`, then a deliver pass that sends what it queued."""
    await run_retention(services, now=at, budget=10)
    await Deliverer(services, options=FAST).run_pass(now=at, budget=5)


async def _dead_to_new_destination(
    services: Services, conn: Conn, tenant: Tenant, form: str, url: str, at: datetime
) -> None:
    """A destination whose receiver refuses its first delivery for good (dead at once)."""
    dst, rte = await make_route_to(conn, tenant, form, config={"url": url})
    await make_delivery(conn, tenant, form, dst, rte, target={"url": url}, next_attempt_at=at)
    await Deliverer(services, options=FAST).run_pass(now=at, budget=5)


async def test_notifications__one_email_per_kind_per_hour_then_a_digest(
    services: Services, conn: Conn, smtp_server: tuple[str, list[Envelope]]
) -> None:
    url, received = smtp_server
    mail = with_settings(services, email_provider="smtp", mail_from=SENDER, smtp_url=url)
    now = utcnow() - timedelta(hours=2)
    tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
    async with api_client(mail, tenant.key) as api:
        told = await api.patch("/v1/organization", json={"notify": [OWNER, "Ops@Example.com"]})
        assert told.json()["notify"] == [OWNER]  # each address once
    with receiver(status(410)) as peer:
        # Two destinations die within the tick: both in one email.
        await _dead_to_new_destination(mail, conn, tenant, form, peer.url, now)
        await _dead_to_new_destination(mail, conn, tenant, form, peer.url, now)
        await _tick(mail, now)
        await _tick(mail, now + timedelta(minutes=1))  # nothing new: nothing sent
        [first] = _parsed(received)
        assert first["To"] == OWNER
        assert first["Subject"] == "Deliveries are failing to 2 destinations or forms"
        # A third within the hour waits for it to end, then comes alone in a digest.
        await _dead_to_new_destination(
            mail, conn, tenant, form, peer.url, now + timedelta(minutes=10)
        )
        await _tick(mail, now + timedelta(minutes=11))
        await _tick(mail, now + timedelta(minutes=59))
        assert len(received) == 1
        await _tick(mail, now + timedelta(minutes=61))
    first, digest = _parsed(received)
    assert digest["Subject"] == "Deliveries to “Hook” are failing"
    body = digest.get_body()
    assert body is not None and "/app/alerts" in body.get_content()
    sent = await rows(conn, "SELECT status FROM deliveries WHERE kind = 'notification'")
    assert sent == [{"status": "sent"}, {"status": "sent"}]


async def test_notifications__the_monthly_quota_reached_is_told_once(
    services: Services, conn: Conn, smtp_server: tuple[str, list[Envelope]]
) -> None:
    url, received = smtp_server
    mail = with_settings(services, email_provider="smtp", mail_from=SENDER, smtp_url=url)
    tenant, form = await setup_form(conn, plan="free")
    now = utcnow()
    await conn.execute(
        "INSERT INTO usage_counters (organization_id, month, submissions)"
        " VALUES (%(org)s, %(month)s, 99)",
        {"org": tenant.org, "month": month_of(now)},
    )
    async with api_client(mail, tenant.key) as api:
        await api.patch("/v1/organization", json={"notify": [OWNER]})
    await _tick(mail, now)
    assert received == []  # 99 of 100
    async with submit_client(mail) as client:
        for name in ("Ada", "Grace"):  # the 100th, and one over
            answer = await client.post(f"/s/{form}", data={"name": name}, headers=JSON_ACCEPT)
            assert answer.status_code == 201, answer.text
            await _tick(mail, utcnow())
    await _tick(mail, utcnow() + timedelta(hours=2))
    [notice] = _parsed(received)
    assert notice["Subject"] == "Postbag: this month's submissions reached the plan's 100"
    assert notice["To"] == OWNER
    async with dashboard_client(mail) as client:
        await sign_in(client, tenant.key, role="viewer")
        page = await client.get("/app/alerts")
    month = month_of(now).strftime("%Y-%m")
    assert f"Quota reached: 100 submissions in {month}, the plan's 100" in page.text


async def test_notifications__an_organization_without_addresses_is_sent_nothing(
    services: Services, conn: Conn, smtp_server: tuple[str, list[Envelope]]
) -> None:
    url, received = smtp_server
    mail = with_settings(services, email_provider="smtp", mail_from=SENDER, smtp_url=url)
    now = utcnow()
    tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
    with receiver(status(410)) as peer:
        await _dead_to_new_destination(mail, conn, tenant, form, peer.url, now)
        await _tick(mail, now)
        # Addresses given later bring no stale notice.
        async with api_client(mail, tenant.key) as api:
            await api.patch("/v1/organization", json={"notify": [OWNER]})
        await _tick(mail, now + timedelta(hours=2))
    assert received == []
    assert await rows(conn, "SELECT id FROM deliveries WHERE kind = 'notification'") == []
    handled = await rows(conn, "SELECT handled_at IS NOT NULL AS handled FROM notifications")
    assert handled == [{"handled": True}]
    # Kept for the history period, like events.
    stats = await run_retention(mail, now=now + timedelta(days=HISTORY_DAYS + 1), budget=10)
    assert stats["notifications_pruned"] == 1
    assert await rows(conn, "SELECT id FROM notifications") == []


async def test_organization_api__notify_addresses_read_and_validated(
    services: Services, conn: Conn
) -> None:
    tenant, _ = await setup_form(conn, plan="self_hosted", routes=0)
    async with api_client(services, tenant.key) as api:
        assert (await api.get("/v1/organization")).json() == {
            "id": tenant.org,
            "notify": [],
            "notify_destination": None,
        }
        for bad in (
            {"notify": ["not an address"]},
            {"notify": [f"o{n}@example.com" for n in range(11)]},
            {"notify": "ops@example.com"},
            {"notify": [OWNER], "plan": "pro"},
            {},
        ):
            answer = await api.patch("/v1/organization", json=bad)
            body = assert_problem(answer, 422, "invalid_input")
            assert error_fields(body)
        assert (await api.get("/v1/organization")).json()["notify"] == []
        set_ = await api.patch("/v1/organization", json={"notify": [OWNER]})
        assert set_.json() == {"id": tenant.org, "notify": [OWNER], "notify_destination": None}
        cleared = await api.patch("/v1/organization", json={"notify": []})
        assert cleared.json()["notify"] == []


async def test_notifications__ticks_racing_pause_once_and_email_once(
    services: Services, conn: Conn, smtp_server: tuple[str, list[Envelope]]
) -> None:
    url, received = smtp_server
    mail = with_settings(services, email_provider="smtp", mail_from=SENDER, smtp_url=url)
    now = utcnow()
    tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
    dst, rte = await make_route_to(conn, tenant, form, config={"url": "http://127.0.0.1:9/h"})
    _, dlv = await make_delivery(
        conn, tenant, form, dst, rte, target={"url": "http://127.0.0.1:9/h"}
    )
    # A day of failed attempts under the storm breaker, moved back in the database.
    for n in range(12):
        await add_attempt(
            conn,
            tenant,
            dlv,
            attempt=n + 1,
            at=now - timedelta(hours=2 * n),
            duration_ms=5,
            outcome="failed",
        )
    await conn.execute(
        "UPDATE destinations SET health = 'failing', consecutive_failures = 17,"
        " failing_since = %(at)s WHERE id = %(id)s",
        {"id": dst, "at": now - timedelta(hours=25)},
    )
    async with api_client(mail, tenant.key) as api:
        await api.patch("/v1/organization", json={"notify": [OWNER]})

    async def pause() -> int:
        async with mail.db.transaction() as tx:
            return await pause_failing(tx, now=now)

    # Four workers' statements at once, each on its own connection: the pause, then the fold.
    paused = await asyncio.gather(*(pause() for _ in range(4)))
    assert sorted(paused) == [0, 0, 0, 1]
    public_url = str(mail.settings.public_url)
    emails = await asyncio.gather(
        *(send_due(mail.db, now=now, public_url=public_url) for _ in range(4))
    )
    assert sorted(emails) == [0, 0, 0, 1]
    await Deliverer(mail, options=FAST).run_pass(now=now, budget=5)
    [notice] = _parsed(received)
    assert notice["Subject"] == "Postbag paused the destination “Hook”"
    events = await rows(conn, "SELECT subject_id FROM events WHERE type = 'destination.paused'")
    assert events == [{"subject_id": dst}]
    # On the Alerts page too, with where it went.
    async with dashboard_client(mail) as client:
        await sign_in(client, tenant.key, role="viewer")
        page = await client.get("/app/alerts")
    row = page.text.split('<table class="notices">')[1].split("</table>")[0]
    assert f'Destination paused: <a href="/app/destinations#dest-{dst}">Hook</a>' in row
    assert f'{OWNER} <span class="hint">email, sent</span>' in row


async def test_notifications__a_self_pause_is_an_alert_and_its_email_says_the_owners_figures(
    services: Services, conn: Conn, smtp_server: tuple[str, list[Envelope]]
) -> None:
    url, received = smtp_server
    mail = with_settings(services, email_provider="smtp", mail_from=SENDER, smtp_url=url)
    now = utcnow()
    tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
    dst, rte = await make_route_to(conn, tenant, form, config={"url": "http://127.0.0.1:9/h"})
    _, dlv = await make_delivery(
        conn, tenant, form, dst, rte, target={"url": "http://127.0.0.1:9/h"}
    )
    # Ten attempts failed in the last day under the storm breaker.
    for n in range(10):
        at = now - timedelta(hours=2 * n)
        await add_attempt(conn, tenant, dlv, attempt=n + 1, at=at, duration_ms=5, outcome="failed")
    await conn.execute(
        "UPDATE destinations SET health = 'failing', consecutive_failures = 15,"
        " failing_since = %(at)s WHERE id = %(id)s",
        {"id": dst, "at": now - timedelta(hours=25)},
    )
    async with api_client(mail, tenant.key) as api:
        await api.patch("/v1/organization", json={"notify": [OWNER]})
        # The owner's own threshold: one failed attempt in 24 hours.
        windowed = await api.patch(
            f"/v1/destinations/{dst}", json={"pause_after": {"hours": 24, "attempts": 1}}
        )
        assert windowed.json()["pause_after"] == {"hours": 24, "attempts": 1}
        await _tick(mail, now)
        [alert] = (await api.get("/v1/alerts")).json()["data"]
        async with dashboard_client(mail) as client:
            await sign_in(client, tenant.key)
            page = (await client.get("/app/alerts")).text
        assert "paused itself: 10 attempts in 24 h" in page
        resumed = await api.patch(f"/v1/destinations/{dst}", json={"enabled": True})
        assert resumed.status_code == 200, resumed.text
        [after] = (await api.get("/v1/alerts")).json()["data"]
    assert (alert["kind"], alert["subject"], alert["status"]) == (
        "destination.paused",
        dst,
        "open",
    )
    assert alert["detail"] == (
        "paused itself: 10 attempts in 24 h, none sent (it pauses after 1 failed in 24 h)"
    )
    assert after["status"] == "resolved"
    [notice] = _parsed(received)
    body = notice.get_body()
    assert body is not None
    text = body.get_content()
    assert "10 attempts in 24 hours, none sent (it pauses after 1 failed in 24 hours)" in text
    assert "or more" not in text


async def test_notifications__also_go_to_the_chosen_webhook_and_show_on_the_alerts_page(
    services: Services, conn: Conn, smtp_server: tuple[str, list[Envelope]]
) -> None:
    url, received = smtp_server
    mail = with_settings(services, email_provider="smtp", mail_from=SENDER, smtp_url=url)
    now = utcnow()
    tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
    email = await make_destination(conn, tenant, type="email", config={"to": [OWNER]})
    with receiver() as ops, receiver(status(410)) as gone:
        chosen = await make_destination(conn, tenant, config={"url": f"{ops.url}/ops"})
        async with dashboard_client(mail) as client:
            csrf = await sign_in(client, tenant.key, role="admin")
            page = await client.get("/app/alerts")
            assert f'<option value="{chosen}">Hook (webhook)</option>' in page.text
            assert f'value="{email}"' not in page.text  # an email destination is not offered
            wrong = await client.post(
                "/app/alerts/notices",
                data={"csrf": csrf, "notify": "", "notify_destination": email},
            )
            assert wrong.status_code == 422 and "takes no notices" in wrong.text
            saved = await client.post(
                "/app/alerts/notices",
                data={"csrf": csrf, "notify": OWNER, "notify_destination": chosen},
            )
            assert saved.status_code == 303
            await _dead_to_new_destination(mail, conn, tenant, form, gone.url, now)
            await _tick(mail, now)
            page = await client.get("/app/alerts")
        async with dashboard_client(mail) as viewer:
            await sign_in(viewer, tenant.key, role="viewer")
            read_only = await viewer.get("/app/alerts")
    [notice] = _parsed(received)
    assert notice["Subject"] == "Deliveries to “Hook” are failing"
    [told] = ops.requests
    assert told.headers["X-Postbag-Event"] == "postbag.notice"
    body = json.loads(told.body)
    assert (body["event"], body["kind"]) == ("postbag.notice", "delivery.dead")
    assert body["subject"] == notice["Subject"] and "/app/alerts" in body["text"]
    assert told.headers["X-Postbag-Signature"].startswith("sha256=")
    # The Alerts page lists the notice and where it went.
    row = page.text.split('<table class="notices">')[1].split("</table>")[0]
    assert "Deliveries dead to" in row and OWNER in row and "destination, sent" in row
    assert "email, sent" in row
    assert "Only admins and owners change where notices go; your role is viewer." in (
        read_only.text
    )
    audited = await rows(conn, "SELECT action FROM audit_log ORDER BY seq")
    assert [r["action"] for r in audited if r["action"] != "member.signed_in"] == [
        "organization.updated"
    ]


async def test_notifications__never_go_to_the_destination_they_are_about(
    services: Services, conn: Conn, smtp_server: tuple[str, list[Envelope]]
) -> None:
    url, received = smtp_server
    mail = with_settings(services, email_provider="smtp", mail_from=SENDER, smtp_url=url)
    now = utcnow()
    tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
    with receiver(status(410)) as gone:
        dst, rte = await make_route_to(conn, tenant, form, config={"url": gone.url})
        async with api_client(mail, tenant.key) as api:
            set_ = await api.patch(
                "/v1/organization", json={"notify": [OWNER], "notify_destination": dst}
            )
            assert set_.json()["notify_destination"] == dst
            kept = await api.patch("/v1/organization", json={"notify": [OWNER]})
            assert kept.json()["notify_destination"] == dst  # left out: kept
            unknown = await api.patch(
                "/v1/organization", json={"notify_destination": "dst_" + "0" * 26}
            )
            assert error_fields(assert_problem(unknown, 422, "invalid_input")) == {
                "notify_destination"
            }
        await make_delivery(
            conn, tenant, form, dst, rte, target={"url": gone.url}, next_attempt_at=now
        )
        await Deliverer(mail, options=FAST).run_pass(now=now, budget=5)
        await _tick(mail, now)
        assert len(gone.requests) == 1  # the submission's delivery, never the notice
    [notice] = _parsed(received)
    assert notice["Subject"] == "Deliveries to “Hook” are failing"
    sent = await rows(
        conn, "SELECT destination_id FROM deliveries WHERE kind = 'notification' ORDER BY id"
    )
    assert sent == [{"destination_id": None}]
    # Deleted, the destination is no longer where notices go.
    async with api_client(mail, tenant.key) as api:
        assert (await api.delete(f"/v1/destinations/{dst}")).status_code == 204
        assert (await api.get("/v1/organization")).json()["notify_destination"] is None
