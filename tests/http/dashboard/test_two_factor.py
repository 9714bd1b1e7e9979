"""TOTP codes work once: the code that turned TOTP on, a code replayed from another client
(at once or later) and an older code are refused."""

from __future__ import annotations

import asyncio
import re
import time

import httpx
import pyotp

from core.platform.db import Conn
from core.platform.services import Services
from tests.support.builders import make_member, make_tenant
from tests.support.dashboard import DashboardClient, csrf_of, dashboard_client

EMAIL = "ada@example.com"
PASSWORD = "correct horse battery"


async def _password_sign_in(
    client: DashboardClient, password: str, code: str = ""
) -> httpx.Response:
    page = await client.get("/app/sign-in")
    return await client.post(
        "/app/sign-in",
        data={"csrf": csrf_of(page.text), "email": EMAIL, "password": password, "code": code},
    )


async def _inside_one_step() -> float:
    """The start of a TOTP step with at least 5 s left in it: the test's codes are chosen
    around it, so they stay what they are while it runs."""
    now = time.time()
    if now % 30 > 25:
        await asyncio.sleep(30 - now % 30 + 0.1)
    return time.time() // 30 * 30


async def test_totp__a_code_signs_in_once_a_replay_from_another_client_or_an_older_code_does_not(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn)
    await make_member(conn, acme, email=EMAIL, password=PASSWORD)
    step = await _inside_one_step()
    async with dashboard_client(services) as client:
        await _password_sign_in(client, PASSWORD)
        token = csrf_of((await client.get("/app/two-factor")).text)
        await client.post("/app/two-factor/start", data={"csrf": token})
        found = re.search(
            r'class="totp-secret">([A-Z2-7]+)<', (await client.get("/app/two-factor")).text
        )
        assert found
        totp = pyotp.TOTP(found.group(1))
        # TOTP turns on with the code just before the current one.
        confirming = totp.at(step - 30)
        on = await client.post("/app/two-factor/confirm", data={"csrf": token, "code": confirming})
        assert on.status_code == 200 and "shown only now" in on.text

    async with (
        dashboard_client(services) as first,
        dashboard_client(services) as second,
        dashboard_client(services) as third,
    ):
        turned_on_with = await _password_sign_in(third, PASSWORD, confirming)
        # The code just after the current one, sent by two clients at once: one signs in.
        fresh = totp.at(step + 30)
        both = await asyncio.gather(
            _password_sign_in(first, PASSWORD, fresh), _password_sign_in(second, PASSWORD, fresh)
        )
        later = await _password_sign_in(third, PASSWORD, fresh)
        # The current code was never used, but is older than the one accepted.
        older = await _password_sign_in(third, PASSWORD, totp.at(step))
    assert turned_on_with.status_code == 401 and "not right" in turned_on_with.text
    assert sorted(a.status_code for a in both) == [303, 401]
    assert later.status_code == 401 and "not right" in later.text
    assert older.status_code == 401 and "not right" in older.text
    cur = await conn.execute("SELECT count(*) AS n FROM dashboard_sessions")
    assert await cur.fetchone() == {"n": 2}  # the one that set TOTP up, and one of the two
