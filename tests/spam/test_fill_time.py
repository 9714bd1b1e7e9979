"""The fill-time token (docs/spam.md#fill-time): issued by `GET /s/{form}/token`, fetched by
the HTML snippet, judged on `POST /s/{form}`: fast, stale, forged and absent."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import datetime, timedelta

import httpx
import pytest

from core.http.submit_app import create_submit_app
from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from tests.support.api import api_client
from tests.support.records import rows
from tests.support.spam import spam_form, stored

VALUES = {"email": "ada@example.com", "message": "Hello"}


@asynccontextmanager
async def _token_client(
    services: Services, clock: Callable[[], datetime]
) -> AsyncIterator[httpx.AsyncClient]:
    """A client of a submit app whose clock issues tokens at `clock()`."""
    app = create_submit_app(services)
    app.state.clock = clock
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app, client=("198.51.100.7", 4000)),
        base_url="http://postbag.test",
    ) as client:
        yield client


async def _token(services: Services, form: str, age: timedelta) -> str:
    async with _token_client(services, lambda: utcnow() - age) as client:
        response = await client.get(f"/s/{form}/token")
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == "*"
    assert response.headers["cache-control"] == "no-store"
    return response.text


async def _post(
    services: Services, conn: Conn, form: str, token: str | None
) -> tuple[str, str | None]:
    # A different message each time: the same payload again would be a repeat.
    values: dict[str, str] = {**VALUES, "message": f"Hello {secrets.token_hex(4)}"}
    if token is not None:
        values["_fill_token"] = token
    async with _token_client(services, utcnow) as client:
        return await stored(client, conn, form, values)


async def test_fill_time__the_snippet_fetches_a_token_into_a_hidden_field(
    services: Services, conn: Conn
) -> None:
    tenant, form = await spam_form(services, conn)
    async with api_client(services, tenant.key) as api:
        snippet = (await api.get(f"/v1/forms/{form}")).json()["html_snippet"]
    assert '<input type="hidden" name="_fill_token" value="">' in snippet
    assert f'/s/{form}/token").then(' in snippet


async def test_fill_time__a_token_after_the_minimum_is_accepted_and_not_stored(
    services: Services, conn: Conn
) -> None:
    _, form = await spam_form(services, conn)
    token = await _token(services, form, timedelta(seconds=10))
    assert await _post(services, conn, form, token) == ("accepted", None)
    [row] = await rows(conn, 'SELECT "values" FROM submissions')
    assert set(row["values"]) == {"email", "message"}


@pytest.mark.parametrize(
    ("spam", "age", "reason"),
    [
        ({}, timedelta(seconds=0), "too_fast"),
        ({"min_fill_seconds": 30}, timedelta(seconds=10), "too_fast"),
        ({"min_fill_seconds": 0}, timedelta(seconds=0), None),
        ({}, timedelta(days=1, minutes=1), "stale_token"),
        ({"max_token_age_seconds": 3600}, timedelta(hours=2), "stale_token"),
        ({}, timedelta(hours=23), None),
        ({}, -timedelta(hours=1), "forged_token"),
    ],
)
async def test_fill_time__fast_and_stale_tokens_are_spam(
    services: Services, conn: Conn, spam: dict[str, int], age: timedelta, reason: str | None
) -> None:
    _, form = await spam_form(services, conn, spam)
    token = await _token(services, form, age)
    assert await _post(services, conn, form, token) == (
        ("spam", reason) if reason else ("accepted", None)
    )


async def test_fill_time__forged_tokens_are_spam(services: Services, conn: Conn) -> None:
    _, form = await spam_form(services, conn)
    _, other = await spam_form(services, conn)
    token = await _token(services, form, timedelta(seconds=10))
    issued, signature = token.split(".")
    forged = [
        f"{int(issued) - 5}.{signature}",  # moved in time
        f"{issued}.{signature[:-2]}AA",  # signature changed
        await _token(services, other, timedelta(seconds=10)),  # another form's
        "not-a-token",
        f"{'9' * 40}.{signature}",
        "",
    ]
    results = [await _post(services, conn, form, t) for t in forged]
    assert results[:-1] == [("spam", "forged_token")] * 5
    assert results[-1] == ("accepted", None)  # an empty field is an absent token


async def test_fill_time__an_absent_token_is_spam_only_when_required(
    services: Services, conn: Conn
) -> None:
    _, relaxed = await spam_form(services, conn)
    _, strict = await spam_form(services, conn, {"require_fill_token": True})
    assert await _post(services, conn, relaxed, None) == ("accepted", None)
    assert await _post(services, conn, strict, None) == ("spam", "missing_token")
    token = await _token(services, strict, timedelta(seconds=5))
    assert await _post(services, conn, strict, token) == ("accepted", None)


async def test_fill_time__a_token_for_a_malformed_form_id_is_refused(services: Services) -> None:
    async with _token_client(services, utcnow) as client:
        response = await client.get("/s/not-a-form/token")
    assert response.status_code == 404
