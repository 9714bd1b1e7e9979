"""Throttling of failed sign-ins and bad API keys, per client, counted in Postgres."""

from __future__ import annotations

import asyncio
import time

import httpx

from core.http.dashboard.pages import SESSION_COOKIE, SIGN_IN_COOKIE
from core.owner.throttle import OVER_LIMIT_DELAY, WINDOW, WINDOW_EPOCH
from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from tests.support.api import api_client, assert_problem
from tests.support.builders import make_member, make_tenant
from tests.support.dashboard import dashboard_client
from tests.support.settings import with_settings

TOKEN = "t" * 43  # the sign-in form's CSRF token is whatever its cookie holds


EMAIL = "ada@example.test"
PASSWORD = "correct horse battery"


async def _sign_in(client: httpx.AsyncClient, password: str) -> httpx.Response:
    return await client.post(
        "/app/sign-in",
        data={"csrf": TOKEN, "email": EMAIL, "password": password},
        headers={"Cookie": f"{SIGN_IN_COOKIE}={TOKEN}"},
    )


async def _inside_one_window() -> None:
    """Wait for the next throttling window when this one ends within 15 s: a test's attempts
    must all be counted in the same window (they are aligned to the clock)."""
    now = utcnow()
    left = (WINDOW - (now - WINDOW_EPOCH) % WINDOW).total_seconds()
    if left < 15:
        await asyncio.sleep(left + 0.1)


async def test_sign_in__past_ten_failures_wrong_passwords_wait_then_429_and_the_right_one_works(
    services: Services, conn: Conn
) -> None:
    """Someone guessing behind a shared address slows their own guesses, and locks no one
    out: a colleague's right password signs in (after the same wait)."""
    acme = await make_tenant(conn)
    await make_member(conn, acme, email=EMAIL, password=PASSWORD)
    await _inside_one_window()
    async with dashboard_client(services) as client:
        answers = await asyncio.gather(*(_sign_in(client, f"wrong-{i:06}") for i in range(30)))
        started = time.monotonic()
        valid_now = await _sign_in(client, PASSWORD)
        waited = time.monotonic() - started
    statuses = sorted(a.status_code for a in answers)
    assert statuses == [401] * 10 + [429] * 20
    throttled = next(a for a in answers if a.status_code == 429)
    assert 1 <= int(throttled.headers["retry-after"]) <= 600
    assert "Too many sign-in attempts" in throttled.text
    # Over the limit the right password is still checked, once the delay has passed.
    assert valid_now.status_code == 303, valid_now.text
    assert SESSION_COOKIE in valid_now.cookies
    assert waited >= OVER_LIMIT_DELAY
    cur = await conn.execute("SELECT count(*) AS n FROM dashboard_sessions")
    assert await cur.fetchone() == {"n": 1}


async def test_sign_in__a_wait_past_the_limit_holds_no_database_connection(
    services: Services,
) -> None:
    """Twenty attempts waiting out their delay at once leave the pool free for everyone."""
    await _inside_one_window()
    async with dashboard_client(services) as client:
        await asyncio.gather(*(_sign_in(client, f"wrong-{i:06}") for i in range(11)))
        waiting = asyncio.gather(*(_sign_in(client, f"again-{i:06}") for i in range(20)))
        await asyncio.sleep(OVER_LIMIT_DELAY / 2)
        busy = services.db.connection_counts()
        answers = await waiting
    assert sorted(a.status_code for a in answers) == [429] * 20
    assert busy.get("in_use", 0) == 0, busy


async def test_sign_in__successes_do_not_use_up_the_limit(services: Services, conn: Conn) -> None:
    acme = await make_tenant(conn)
    await make_member(conn, acme, email=EMAIL, password=PASSWORD)
    async with dashboard_client(services) as client:
        answers = [await _sign_in(client, PASSWORD) for _ in range(12)]
    assert [a.status_code for a in answers] == [303] * 12


async def test_api__bad_keys_from_one_client_get_429_valid_keys_still_work(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn)
    proxied = with_settings(services, trusted_proxies=["127.0.0.1/32"])
    attacker = {"Authorization": "Bearer pb_guess", "X-Forwarded-For": "2001:db8:1:2::7"}
    # The same /64: the same client.
    neighbour = {"Authorization": "Bearer pb_other", "X-Forwarded-For": "2001:db8:1:2::8"}
    elsewhere = {"Authorization": "Bearer pb_guess", "X-Forwarded-For": "2001:db8:9:9::1"}
    async with api_client(proxied) as client:
        first = [(await client.get("/v1/forms", headers=attacker)).status_code for _ in range(20)]
        over = await client.get("/v1/forms", headers=neighbour)
        other_client = await client.get("/v1/forms", headers=elsewhere)
        valid = await client.get(
            "/v1/forms", headers={**acme.headers, "X-Forwarded-For": "2001:db8:1:2::7"}
        )
    assert first == [401] * 20
    assert_problem(over, 429, "too_many_attempts")
    assert 1 <= int(over.headers["retry-after"]) <= 600
    assert_problem(other_client, 401, "unauthenticated")
    assert valid.status_code == 200, valid.text
    cur = await conn.execute("SELECT kind, failures FROM auth_failures ORDER BY failures")
    assert await cur.fetchall() == [
        {"kind": "api_key", "failures": 1},
        {"kind": "api_key", "failures": 21},
    ]


async def test_mcp__bad_keys_are_throttled_like_the_api(services: Services, conn: Conn) -> None:
    acme = await make_tenant(conn)
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json, text/event-stream"}
    guess = {**headers, "Authorization": "Bearer pb_guess"}
    async with api_client(services) as client:
        # Bad keys sent to /v1 and /mcp count together: one client, one limit.
        first = [(await client.get("/v1/forms", headers=guess)).status_code for _ in range(10)]
        first += [
            (await client.post("/mcp", json=listing, headers=guess)).status_code for _ in range(10)
        ]
        over = await client.post("/mcp", json=listing, headers=guess)
        valid = await client.post(
            "/mcp",
            json=listing,
            headers={**headers, "Authorization": acme.headers["Authorization"]},
        )
    assert first == [401] * 20
    assert_problem(over, 429, "too_many_attempts")
    assert 1 <= int(over.headers["retry-after"]) <= 600
    assert valid.status_code == 200, valid.text
