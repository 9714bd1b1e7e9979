"""Throttling of sign-ins (per client and per account), reset links and bad API keys, counted
in Postgres; guesses sent at once race real database connections."""

from __future__ import annotations

import asyncio
import time

import httpx
import pyotp
from aiosmtpd.smtp import Envelope

from core.http.dashboard.pages import SESSION_COOKIE, SIGN_IN_COOKIE
from core.owner.credentials import new_token, token_hash
from core.owner.throttle import WINDOW, WINDOW_EPOCH
from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from tests.support.api import api_client, assert_problem
from tests.support.builders import make_member, make_tenant
from tests.support.dashboard import dashboard_client
from tests.support.mail import link_in, mailed
from tests.support.settings import with_settings

TOKEN = "t" * 43  # the sign-in form's CSRF token is whatever its cookie holds


EMAIL = "ada@example.test"
PASSWORD = "correct horse battery"


def _proxied(services: Services) -> Services:
    """The app behind a trusted proxy: each request names its client in X-Forwarded-For."""
    return with_settings(services, trusted_proxies=["127.0.0.1/32"])


def _headers(client: int | None) -> dict[str, str]:
    headers = {"Cookie": f"{SIGN_IN_COOKIE}={TOKEN}"}
    if client is not None:
        headers["X-Forwarded-For"] = f"198.51.100.{client}"
    return headers


async def _sign_in(
    client: httpx.AsyncClient,
    password: str,
    address: int | None = None,
    *,
    email: str = EMAIL,
    code: str = "",
) -> httpx.Response:
    """A sign-in (from 198.51.100.`address` when the app trusts the proxy)."""
    return await client.post(
        "/app/sign-in",
        data={"csrf": TOKEN, "email": email, "password": password, "code": code},
        headers=_headers(address),
    )


async def _reset_link(conn: Conn, member_id: str) -> str:
    """The path of a live reset link for the member, as /app/forgot emails it."""
    token = new_token()
    await conn.execute(
        "INSERT INTO member_links (token_hash, member_id, kind, expires_at)"
        " VALUES (%(hash)s, %(member)s, 'password_reset', now() + interval '1 hour')",
        {"hash": token_hash(token), "member": member_id},
    )
    return f"/app/reset/{token}"


async def _inside_one_window() -> None:
    """Wait for the next throttling window when this one ends within 15 s: a test's attempts
    must all be counted in the same window (they are aligned to the clock)."""
    now = utcnow()
    left = (WINDOW - (now - WINDOW_EPOCH) % WINDOW).total_seconds()
    if left < 15:
        await asyncio.sleep(left + 0.1)


async def test_sign_in__thirty_guesses_at_once_are_held_to_the_limit_then_a_right_one_is_refused(
    services: Services, conn: Conn
) -> None:
    """Guesses sent at once are counted before any is checked: ten are checked, the rest
    refused unchecked; past the limit even the right password is refused (it would have
    signed in), and a colleague at another address is not locked out."""
    acme = await make_tenant(conn)
    await make_member(conn, acme, email=EMAIL, password=PASSWORD)
    await _inside_one_window()
    async with dashboard_client(_proxied(services)) as client:
        first = await asyncio.gather(*(_sign_in(client, f"wrong-{i:06}", 7) for i in range(30)))
        guesses = [f"again-{i:06}" for i in range(29)] + [PASSWORD]
        over = await asyncio.gather(*(_sign_in(client, guess, 7) for guess in guesses))
        colleague = await _sign_in(client, PASSWORD, 8)
    assert sorted(a.status_code for a in first) == [401] * 10 + [429] * 20
    assert [a.status_code for a in over] == [429] * 30
    assert 1 <= int(over[-1].headers["retry-after"]) <= 600
    assert "Too many sign-in attempts" in over[-1].text
    assert colleague.status_code == 303, colleague.text
    assert SESSION_COOKIE in colleague.cookies
    cur = await conn.execute("SELECT count(*) AS n FROM dashboard_sessions")
    assert await cur.fetchone() == {"n": 1}


async def test_sign_in__guesses_from_many_addresses_at_once_are_held_to_the_account_limit(
    services: Services, conn: Conn
) -> None:
    """Thirty addresses guessing one account at once: twenty guesses are checked, whatever
    the addresses; then the account's right password is refused from a new address, while
    another member signs in from one of the guessing addresses."""
    acme = await make_tenant(conn)
    await make_member(conn, acme, email=EMAIL, password=PASSWORD)
    await make_member(conn, acme, email="bob@example.test", password=PASSWORD)
    await _inside_one_window()
    async with dashboard_client(_proxied(services)) as client:
        guesses = await asyncio.gather(
            *(_sign_in(client, f"wrong-{i:06}", i) for i in range(1, 31))
        )
        right = await _sign_in(client, PASSWORD, 100)
        other = await _sign_in(client, PASSWORD, 1, email="BOB@example.test")
    assert sorted(a.status_code for a in guesses) == [401] * 20 + [429] * 10
    assert right.status_code == 429 and "Too many sign-in attempts" in right.text
    assert other.status_code == 303, other.text


async def test_sign_in__totp_code_guesses_at_once_are_held_to_the_account_limit(
    services: Services, conn: Conn
) -> None:
    """Who knows the password guesses codes from thirty addresses at once: twenty are
    checked; then the right code is refused until the window ends."""
    secret = pyotp.random_base32()
    acme = await make_tenant(conn)
    await make_member(conn, acme, email=EMAIL, password=PASSWORD, totp_secret=secret)
    await _inside_one_window()
    totp = pyotp.TOTP(secret)
    near = {totp.at(time.time() + 30 * offset) for offset in (-1, 0, 1, 2)}
    wrong = [code for code in (f"{n:06}" for n in range(100)) if code not in near][:30]
    async with dashboard_client(_proxied(services)) as client:
        guesses = await asyncio.gather(
            *(_sign_in(client, PASSWORD, i, code=code) for i, code in enumerate(wrong, 1))
        )
        right = await _sign_in(client, PASSWORD, 100, code=totp.now())
    assert sorted(a.status_code for a in guesses) == [401] * 20 + [429] * 10
    assert all("not right" in a.text for a in guesses if a.status_code == 401)
    assert right.status_code == 429, right.text


async def test_reset_link__guesses_at_once_are_held_to_the_limit_per_client(
    services: Services, conn: Conn
) -> None:
    """Thirty guessed reset links at once: ten are looked up, the rest refused; the guesser's
    address is refused even a real link until the window ends, another address uses it."""
    acme = await make_tenant(conn)
    member = await make_member(conn, acme, email=EMAIL, password=PASSWORD)
    link = await _reset_link(conn, member)
    new = "a new horse battery staple"
    form = {"csrf": TOKEN, "password": new, "repeat": new}
    await _inside_one_window()
    async with dashboard_client(_proxied(services)) as client:

        async def post(path: str, n: int) -> httpx.Response:
            return await client.post(path, data=form, headers=_headers(n))

        guesses = await asyncio.gather(*(post(f"/app/reset/{new_token()}", 7) for _ in range(30)))
        refused_page = await client.get(link, headers=_headers(7))
        refused = await post(link, 7)
        page = await client.get(link, headers=_headers(8))
        used = await post(link, 8)
    assert sorted(a.status_code for a in guesses) == [404] * 10 + [429] * 20
    assert (refused_page.status_code, refused.status_code) == (429, 429)
    assert "Too many attempts" in refused.text and 1 <= int(refused.headers["retry-after"]) <= 600
    assert (page.status_code, used.status_code) == (200, 303)
    cur = await conn.execute("SELECT count(*) AS n FROM member_links WHERE used_at IS NULL")
    assert await cur.fetchone() == {"n": 0}


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


async def test_invitation_link__guesses_at_once_are_held_to_the_limit_per_client(
    services: Services, conn: Conn, smtp_server: tuple[str, list[Envelope]]
) -> None:
    """Thirty guessed invitation links at once: ten are looked up, the rest refused; the
    guesser's address is refused even the real link until the window ends, another address
    joins with it."""
    acme = await make_tenant(conn)
    proxied_mail = mailed(_proxied(services), smtp_server)
    form = {"csrf": TOKEN, "password": PASSWORD, "repeat": PASSWORD}
    await _inside_one_window()
    async with dashboard_client(proxied_mail) as client:
        invited = await client.post(
            "/v1/members", json={"email": "ada@example.com", "role": "viewer"}, headers=acme.headers
        )
        assert invited.status_code == 201, invited.text
        link = link_in(smtp_server[1][0], "/app/invitations/")

        async def post(path: str, n: int) -> httpx.Response:
            return await client.post(path, data=form, headers=_headers(n))

        guesses = await asyncio.gather(
            *(post(f"/app/invitations/{new_token()}", 7) for _ in range(30))
        )
        refused_page = await client.get(link, headers=_headers(7))
        refused = await post(link, 7)
        page = await client.get(link, headers=_headers(8))
        joined = await post(link, 8)
    assert sorted(a.status_code for a in guesses) == [404] * 10 + [429] * 20
    assert (refused_page.status_code, refused.status_code) == (429, 429)
    assert "Too many attempts" in refused.text and 1 <= int(refused.headers["retry-after"]) <= 600
    assert (page.status_code, joined.status_code) == (200, 303)
    cur = await conn.execute("SELECT count(*) AS n FROM memberships WHERE role = 'viewer'")
    assert await cur.fetchone() == {"n": 1}
