"""A destination's health in words that match its numbers, through `/v1` and the dashboard."""

from __future__ import annotations

from datetime import timedelta

import pytest

from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from core.ticks.retention import run_retention
from tests.support.api import api_client
from tests.support.builders import (
    add_attempt,
    make_delivery,
    make_route_to,
    make_tenant,
    setup_form,
)
from tests.support.dashboard import dashboard_client, sign_in

HOOK = {"url": "https://example.com/h"}


async def _attempted(
    services: Services, conn: Conn, outcomes: list[str], duration_ms: int, *, enabled: bool
) -> tuple[str, str]:
    """A destination whose last day of attempts had `outcomes`, each taking `duration_ms`,
    rolled up by the retention tick; returns its id and its organization's key."""
    tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
    dst, rte = await make_route_to(conn, tenant, form, config=HOOK)
    _, dlv = await make_delivery(conn, tenant, form, dst, rte, target=HOOK)
    now = utcnow()
    for n, outcome in enumerate(outcomes):
        at = now - timedelta(minutes=n)
        await add_attempt(
            conn, tenant, dlv, attempt=n + 1, at=at, duration_ms=duration_ms, outcome=outcome
        )
    await conn.execute(
        "UPDATE destinations SET enabled = %(enabled)s,"
        " paused_reason = CASE WHEN NOT %(enabled)s THEN 'owner' END,"
        " paused_at = CASE WHEN NOT %(enabled)s THEN now() END WHERE id = %(id)s",
        {"enabled": enabled, "id": dst},
    )
    await run_retention(services, now=now, budget=10)
    return dst, tenant.key


@pytest.mark.parametrize(
    ("outcomes", "duration_ms", "enabled", "word", "numbers"),
    [
        (["failed"] * 20, 40, True, "failing", "20 attempts in 24 h, 0% sent, p95 0.0 s"),
        (["sent"] * 2 + ["failed"] * 8, 40, True, "failing", "20% sent"),
        (["sent"] * 18 + ["failed"] * 2, 40, True, "degraded", "90% sent"),
        (["sent"] * 20, 7_000, True, "degraded", "p95 7.0 s"),
        (["sent"] * 20, 40, True, "healthy", "100% sent"),
        # Too few to judge a share, but none sent is never healthy.
        (["failed"] * 3, 40, True, "failing", "3 attempts in 24 h, 0% sent"),
        (["sent"] + ["failed"] * 3, 40, True, "healthy", "4 attempts in 24 h, 25% sent"),
        (["sent"] * 20, 40, False, "paused", "100% sent"),
    ],
    ids=["all-fail", "mostly-fail", "some-fail", "slow", "fine", "none-sent", "too-few", "paused"],
)
async def test_health__the_word_matches_the_last_day_of_attempts(
    services: Services,
    conn: Conn,
    outcomes: list[str],
    duration_ms: int,
    enabled: bool,
    word: str,
    numbers: str,
) -> None:
    dst, key = await _attempted(services, conn, outcomes, duration_ms, enabled=enabled)
    async with api_client(services, key) as api:
        body = (await api.get(f"/v1/destinations/{dst}")).json()
    assert (body["health"], body["throttled"]) == (word, False)
    async with dashboard_client(services) as client:
        await sign_in(client, key)
        page = (await client.get("/app/destinations")).text
    row = page.split(f'id="dest-{dst}"', 1)[1].split("</tr>", 1)[0]
    assert f">{word.capitalize()}</span>" in row
    assert numbers in row


async def test_health__an_email_destination_shows_its_recipients_as_text(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn, plan="self_hosted")
    async with api_client(services, acme.key) as api:
        made = await api.post(
            "/v1/destinations",
            json={
                "type": "email",
                "name": "Inbox",
                "config": {"to": ["a@example.com", "b@example.com"]},
            },
        )
    assert made.status_code == 201, made.text
    async with dashboard_client(services) as client:
        await sign_in(client, acme.key)
        page = (await client.get("/app/destinations")).text
    assert "a@example.com, b@example.com" in page
    assert "[&#39;" not in page and "['" not in page
