"""Duplicates (docs/spam.md#duplicates): the same message from many addresses is spam
`duplicate_content` after the first `duplicate_max`, counted exactly under concurrency."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import httpx

from core.http.submit_app import create_submit_app
from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from core.ticks.retention import run_retention
from tests.support.records import rows
from tests.support.settings import with_settings
from tests.support.spam import JSON_ACCEPT, spam_form

PROXY = "198.51.100.7"
SEO = {"email": "seo@agency.example", "message": "We offer  SEO services for your site!"}


def _proxied(services: Services, app_clock: timedelta = timedelta()) -> httpx.AsyncClient:
    """A client behind a trusted proxy: each post names its client in X-Forwarded-For."""
    app = create_submit_app(with_settings(services, trusted_proxies=[f"{PROXY}/32"]))
    app.state.clock = lambda: utcnow() + app_clock
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app, client=(PROXY, 4000)), base_url="http://t"
    )


async def _post(client: httpx.AsyncClient, form: str, n: int, values: dict[str, str]) -> str:
    response = await client.post(
        f"/s/{form}",
        json=values,
        headers={**JSON_ACCEPT, "X-Forwarded-For": f"203.0.113.{n}"},
    )
    assert response.status_code == 201, response.text
    return str(response.json()["receipt"])


async def _statuses(conn: Conn) -> dict[tuple[str, str | None], int]:
    found = await rows(
        conn, "SELECT status, reason, count(*)::int AS n FROM submissions GROUP BY 1, 2"
    )
    return {(r["status"], r["reason"]): r["n"] for r in found}


async def test_duplicates__50_identical_posts_from_50_addresses_keep_3_accepted(
    services: Services, conn: Conn
) -> None:
    _, form = await spam_form(services, conn, rate_limit={"max": 10})
    async with _proxied(services) as client:
        receipts = await asyncio.gather(
            *(
                # The same message, spelled with other cases and spaces by some bots.
                _post(client, form, n, SEO if n % 2 else {**SEO, "message": SEO["message"].upper()})
                for n in range(50)
            )
        )
        assert len(set(receipts)) == 50
        other = await _post(client, form, 51, {**SEO, "message": "A real question, thanks"})
    assert await _statuses(conn) == {
        ("accepted", None): 4,
        ("spam", "duplicate_content"): 47,
    }
    [row] = await rows(conn, "SELECT status FROM submissions WHERE id = %(id)s", id=other)
    assert row["status"] == "accepted"
    clients = await rows(conn, "SELECT count(DISTINCT client_hash)::int AS n FROM submissions")
    assert clients == [{"n": 51}]


async def test_duplicates__a_new_window_starts_over_and_the_limit_is_the_owners(
    services: Services, conn: Conn
) -> None:
    _, form = await spam_form(
        services, conn, {"duplicate_max": 1, "duplicate_window_seconds": 3600}
    )
    async with _proxied(services) as client:
        first = [await _post(client, form, n, SEO) for n in range(2)]
    async with _proxied(services, app_clock=timedelta(hours=1, seconds=1)) as later:
        second = [await _post(later, form, n + 10, SEO) for n in range(2)]
    reasons = await rows(
        conn,
        "SELECT id, reason FROM submissions WHERE id = ANY(%(ids)s)",
        ids=first + second,
    )
    by_id = {r["id"]: r["reason"] for r in reasons}
    assert [by_id[i] for i in first + second] == [
        None,
        "duplicate_content",
        None,
        "duplicate_content",
    ]


async def test_duplicates__short_values_and_a_form_with_the_check_off_are_not_counted(
    services: Services, conn: Conn
) -> None:
    _, short = await spam_form(services, conn)
    _, off = await spam_form(services, conn, {"duplicate_max": None})
    async with _proxied(services) as client:
        for n in range(6):
            await _post(client, short, n, {"choice": "yes"})
            await _post(client, off, n, SEO)
    assert await _statuses(conn) == {("accepted", None): 12}


async def test_duplicates__the_retention_tick_forgets_fingerprints_of_windows_long_over(
    services: Services, conn: Conn
) -> None:
    _, form = await spam_form(services, conn)
    async with _proxied(services) as client:
        await _post(client, form, 1, SEO)
    assert len(await rows(conn, "SELECT 1 FROM spam_fingerprints")) == 1
    await run_retention(services, now=utcnow() + timedelta(days=29), budget=10)
    assert len(await rows(conn, "SELECT 1 FROM spam_fingerprints")) == 1
    await run_retention(services, now=utcnow() + timedelta(days=31), budget=10)
    assert await rows(conn, "SELECT 1 FROM spam_fingerprints") == []


PITCH = (
    "Hello! We help businesses like yours reach the first page of Google within 30 days. "
    "Reply to this message for a free audit of your website."
)


async def test_duplicates__one_pitch_from_30_addresses_with_30_names_and_emails_is_caught(
    services: Services, conn: Conn
) -> None:
    _, form = await spam_form(services, conn, rate_limit={"max": 10})
    async with _proxied(services) as client:
        receipts = await asyncio.gather(
            *(
                _post(
                    client,
                    form,
                    n,
                    {"name": f"Visitor {n}", "email": f"lead{n}@mail{n}.example", "message": PITCH},
                )
                for n in range(30)
            )
        )
    assert len(set(receipts)) == 30
    statuses = await _statuses(conn)
    print(f"30 copies of one pitch: {statuses}")
    assert statuses[("spam", "duplicate_content")] >= 26


async def test_duplicates__short_answers_from_many_visitors_are_never_counted_alone(
    services: Services, conn: Conn
) -> None:
    _, form = await spam_form(services, conn)
    async with _proxied(services) as client:
        for n in range(6):
            values = {"email": f"person{n}@mail.example", "message": "I would like a quote"}
            await _post(client, form, n, values)
    assert await _statuses(conn) == {("accepted", None): 6}


async def test_duplicates__a_post_with_long_texts_counts_them_not_its_values(
    services: Services, conn: Conn
) -> None:
    _, form = await spam_form(services, conn, {"duplicate_max": 2})
    long_texts = {"email": "lead@shop.example", "message": PITCH, "notes": PITCH + " Twice."}
    async with _proxied(services) as client:
        await _post(client, form, 1, long_texts)
        counted = len(await rows(conn, "SELECT 1 FROM spam_fingerprints"))
        await _post(client, form, 2, SEO)
        # The same values again, as a browser posting twice from another address: still
        # caught, through their long texts.
        for n in (3, 4):
            await _post(client, form, n, long_texts)
    assert counted == 2  # one per long text, none for the whole values
    assert len(await rows(conn, "SELECT 1 FROM spam_fingerprints")) == 3  # SEO: its values
    assert await _statuses(conn) == {("accepted", None): 3, ("spam", "duplicate_content"): 1}
