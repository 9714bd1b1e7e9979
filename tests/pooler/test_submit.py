"""Submits through PgBouncer in transaction mode: many at once, and one key raced."""

from __future__ import annotations

import asyncio
from collections import Counter

import httpx

from core.http.server import combined_app
from core.platform.db import Conn
from core.platform.services import Services
from tests.support.builders import setup_form
from tests.support.records import rows

POSTS = 120
CONCURRENCY = 20


def _client(services: Services) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(
            app=combined_app(services, local=False), raise_app_exceptions=False
        ),
        base_url="http://127.0.0.1:8080",
        headers={"Accept": "application/json"},
    )


async def _posts(
    client: httpx.AsyncClient, form: str, count: int, headers: dict[str, str] | None = None
) -> list[httpx.Response]:
    """`count` posts, CONCURRENCY at a time; with an idempotency key, all the same post."""
    gate = asyncio.Semaphore(CONCURRENCY)

    async def post(index: int) -> httpx.Response:
        number = 0 if headers else index
        async with gate:
            return await client.post(
                f"/s/{form}",
                data={"email": f"ada{number}@example.com", "message": f"Hello {number}"},
                headers=headers,
            )

    return list(await asyncio.gather(*(post(index) for index in range(count))))


async def test_submit__120_concurrent_posts_through_the_pooler_are_all_stored(
    pooled: Services, conn: Conn
) -> None:
    # One client address: a limit above the posts keeps every one accepted.
    _tenant, form = await setup_form(conn, plan="self_hosted", rate_limit_max=POSTS)
    async with _client(pooled) as client:
        answers = await _posts(client, form, POSTS)
    statuses = Counter(answer.status_code for answer in answers)
    assert statuses == {201: POSTS}, statuses
    stored = await rows(
        conn,
        "SELECT count(*) AS n FROM submissions WHERE form_id = %(f)s AND status = 'accepted'",
        f=form,
    )
    planned = await rows(conn, "SELECT count(*) AS n FROM deliveries WHERE status = 'pending'")
    assert stored[0]["n"] == POSTS
    assert planned[0]["n"] == POSTS


async def test_submit__one_idempotency_key_raced_through_the_pooler_stores_once(
    pooled: Services, conn: Conn
) -> None:
    _tenant, form = await setup_form(conn, plan="self_hosted")
    async with _client(pooled) as client:
        answers = await _posts(client, form, 40, headers={"Idempotency-Key": "race-1"})
    assert {answer.status_code for answer in answers} <= {200, 201}, [
        answer.text for answer in answers if answer.status_code >= 300
    ]
    assert len({answer.json()["receipt"] for answer in answers}) == 1
    stored = await rows(conn, "SELECT count(*) AS n FROM submissions WHERE form_id = %(f)s", f=form)
    assert stored[0]["n"] == 1
