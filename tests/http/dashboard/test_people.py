"""People in the dashboard: invitations and resets through a real SMTP peer, TOTP with
recovery codes, sessions ended from another browser or by removing the member, switching
organizations, and what a viewer's pages leave out."""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

import pyotp
from aiosmtpd.smtp import Envelope

from core.outbox.worker import Deliverer
from core.owner.throttle import WINDOW, WINDOW_EPOCH
from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from tests.support.api import assert_problem
from tests.support.builders import (
    make_delivery,
    make_form,
    make_member,
    make_route_to,
    make_tenant,
    sign_in_link,
)
from tests.support.dashboard import DashboardClient, csrf_of, dashboard_client, sign_in
from tests.support.mail import link_in, mailed
from tests.support.records import rows

PASSWORD = "correct horse battery"
MARKER = "blue-bicycle-7731"


async def _password_sign_in(
    client: DashboardClient, email: str, password: str, code: str = ""
) -> Any:
    page = await client.get("/app/sign-in")
    return await client.post(
        "/app/sign-in",
        data={"csrf": csrf_of(page.text), "email": email, "password": password, "code": code},
    )


async def test_invitation__emailed_accepted_once_signs_in_with_the_role(
    services: Services, conn: Conn, smtp_server: tuple[str, list[Envelope]]
) -> None:
    acme = await make_tenant(conn)
    sending = mailed(services, smtp_server)
    async with dashboard_client(sending) as client:
        invited = await client.post(
            "/v1/members",
            json={"email": "Ada@Example.com", "role": "operator"},
            headers=acme.headers,
        )
        assert invited.status_code == 201, invited.text
        [envelope] = smtp_server[1]
        link = link_in(envelope, "/app/invitations/")
        token = link.rsplit("/", 1)[1]
        assert token not in invited.text
        listed = await client.get("/v1/members", headers=acme.headers)
        assert listed.json()["data"] == []  # not a member until accepted

        page = await client.get(link)
        assert page.status_code == 200 and "Join Acme" in page.text
        assert page.headers["referrer-policy"] == "no-referrer"
        differ = await client.post(
            link,
            data={"csrf": csrf_of(page.text), "password": PASSWORD, "repeat": PASSWORD + "x"},
        )
        assert differ.status_code == 422 and "differ" in differ.text
        accepted = await client.post(
            link, data={"csrf": csrf_of(differ.text), "password": PASSWORD, "repeat": PASSWORD}
        )
        assert accepted.status_code == 303 and accepted.headers["location"] == "/app"
        inbox = await client.get("/app")
        assert inbox.status_code == 200 and "Inbox" in inbox.text

        [member] = (await client.get("/v1/members", headers=acme.headers)).json()["data"]
        assert (member["email"], member["role"]) == ("Ada@example.com", "operator")
        assert set(member) == {"id", "email", "role", "joined_at"}
        again = await client.get(link)
        assert again.status_code == 404
    stored = await rows(conn, "SELECT token_hash, accepted_at FROM invitations")
    assert stored[0]["accepted_at"] is not None and token.encode() not in stored[0]["token_hash"]
    [hashed] = await rows(conn, "SELECT password_hash FROM members")
    assert hashed["password_hash"].startswith("$argon2id$") and PASSWORD not in str(hashed)


async def test_invitation__not_sent_stores_nothing_expired_is_gone(
    services: Services, conn: Conn, smtp_server: tuple[str, list[Envelope]]
) -> None:
    acme = await make_tenant(conn)
    await make_member(conn, acme, email="bob@example.com")
    async with dashboard_client(services) as client:  # the `log` provider: nothing sent
        logged = await client.post(
            "/v1/members",
            json={"email": "ada@example.com", "role": "viewer"},
            headers=acme.headers,
        )
        assert_problem(logged, 503, "email_not_sent")
    assert await rows(conn, "SELECT id FROM invitations") == []
    async with dashboard_client(mailed(services, smtp_server)) as client:
        refused = await client.post(
            "/v1/members",
            json={"email": "nobody@example.com", "role": "viewer"},
            headers=acme.headers,
        )
        assert_problem(refused, 503, "email_not_sent")
        member = await client.post(
            "/v1/members",
            json={"email": "BOB@example.com", "role": "viewer"},
            headers=acme.headers,
        )
        assert_problem(member, 409, "already_member")
        bad = await client.post(
            "/v1/members",
            json={"email": "not an address", "role": "viewer"},
            headers=acme.headers,
        )
        assert_problem(bad, 422, "invalid_input")
        sent = await client.post(
            "/v1/members",
            json={"email": "ada@example.com", "role": "viewer"},
            headers=acme.headers,
        )
        assert sent.status_code == 201
        await conn.execute("UPDATE invitations SET expires_at = now() - interval '1 second'")
        expired = await client.get(link_in(smtp_server[1][-1], "/app/invitations/"))
        assert expired.status_code == 404
    assert len(await rows(conn, "SELECT id FROM invitations")) == 1


async def test_invitation__an_existing_member_proves_their_password_and_joins_another(
    services: Services, conn: Conn, smtp_server: tuple[str, list[Envelope]]
) -> None:
    acme, beta = await make_tenant(conn), await make_tenant(conn, name="Beta")
    await make_member(conn, acme, email="ada@example.com", password=PASSWORD)
    async with dashboard_client(mailed(services, smtp_server)) as client:
        sent = await client.post(
            "/v1/members",
            json={"email": "ada@example.com", "role": "admin"},
            headers=beta.headers,
        )
        assert sent.status_code == 201
        link = link_in(smtp_server[1][0], "/app/invitations/")
        page = await client.get(link)
        assert "already has a Postbag password" in page.text
        wrong = await client.post(link, data={"csrf": csrf_of(page.text), "password": "nope"})
        assert wrong.status_code == 422 and "Wrong email or password" in wrong.text
        right = await client.post(link, data={"csrf": csrf_of(wrong.text), "password": PASSWORD})
        assert right.status_code == 303
    joined = await rows(conn, "SELECT organization_id, role FROM memberships ORDER BY created_at")
    assert [(r["organization_id"], r["role"]) for r in joined] == [
        (acme.org, "owner"),
        (beta.org, "admin"),
    ]


async def test_password_reset__emailed_once_ends_sessions_old_password_refused(
    services: Services, conn: Conn, smtp_server: tuple[str, list[Envelope]]
) -> None:
    acme = await make_tenant(conn)
    await make_member(conn, acme, email="ada@example.com", password=PASSWORD)
    sending = mailed(services, smtp_server)
    async with dashboard_client(sending) as old, dashboard_client(sending) as client:
        assert (await _password_sign_in(old, "ada@example.com", PASSWORD)).status_code == 303
        page = await client.get("/app/forgot")
        unknown = await client.post(
            "/app/forgot", data={"csrf": csrf_of(page.text), "email": "eve@example.com"}
        )
        asked = await client.post(
            "/app/forgot", data={"csrf": csrf_of(unknown.text), "email": "ADA@example.com"}
        )
        assert "a link to set a new password is on its way" in unknown.text
        assert asked.text.count("on its way") == unknown.text.count("on its way")
        await Deliverer(sending).run_pass(now=utcnow(), budget=10)  # the email is queued
        [envelope] = smtp_server[1]
        assert envelope.rcpt_tos == ["ada@example.com"]
        link = link_in(envelope, "/app/reset/")
        form = await client.get(link)
        new = "a new horse battery staple"
        short = await client.post(
            link, data={"csrf": csrf_of(form.text), "password": "short", "repeat": "short"}
        )
        assert short.status_code == 422 and "at least 10 characters" in short.text
        done = await client.post(
            link, data={"csrf": csrf_of(short.text), "password": new, "repeat": new}
        )
        assert done.status_code == 303 and done.headers["location"] == "/app"
        assert (await old.get("/app")).headers["location"] == "/app/sign-in"
        assert (await client.get(link)).status_code == 404
        refused = await _password_sign_in(client, "ada@example.com", PASSWORD)
        assert refused.status_code == 401
        assert (await _password_sign_in(client, "ada@example.com", new)).status_code == 303


def _other_code(secret: str) -> str:
    """A 6-digit code the secret does not accept now (nor just before or after)."""
    totp = pyotp.TOTP(secret)
    now = time.time()
    near = {totp.at(now + 30 * offset) for offset in (-1, 0, 1)}
    return next(code for code in (f"{n:06}" for n in range(1000)) if code not in near)


async def test_totp__set_up_then_code_required_wrong_refused_recovery_code_works_once(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn)
    await make_member(conn, acme, email="ada@example.com", password=PASSWORD)
    async with dashboard_client(services) as client:
        await _password_sign_in(client, "ada@example.com", PASSWORD)
        page = await client.get("/app/two-factor")
        token = csrf_of(page.text)
        await client.post("/app/two-factor/start", data={"csrf": token})
        setup = await client.get("/app/two-factor")
        found = re.search(r'class="totp-secret">([A-Z2-7]+)<', setup.text)
        assert found and "otpauth://totp/Postbag:ada%40example.com" in setup.text
        secret = found.group(1)
        wrong = await client.post(
            "/app/two-factor/confirm", data={"csrf": token, "code": _other_code(secret)}
        )
        assert wrong.status_code == 422
        on = await client.post(
            "/app/two-factor/confirm", data={"csrf": token, "code": pyotp.TOTP(secret).now()}
        )
        codes = re.findall(r"<li><code>([a-z0-9-]+)</code></li>", on.text)
        assert len(codes) == 10
        assert "shown only now" in on.text
        assert secret not in (await client.get("/app/two-factor")).text

    email = "ada@example.com"
    async with dashboard_client(services) as client:
        none = await _password_sign_in(client, email, PASSWORD)
        assert none.status_code == 401 and "authenticator app" in none.text
        bad = await _password_sign_in(client, email, PASSWORD, _other_code(secret))
        assert bad.status_code == 401 and "not right" in bad.text
        wrong_password = await _password_sign_in(client, email, "x" * 12, pyotp.TOTP(secret).now())
        assert wrong_password.status_code == 401
        # The code that turned TOTP on is used up: the next one signs in.
        after = pyotp.TOTP(secret).at(time.time() + 30)
        good = await _password_sign_in(client, email, PASSWORD, after)
        assert good.status_code == 303
    async with dashboard_client(services) as client:
        recovered = await _password_sign_in(client, email, PASSWORD, codes[3].upper())
        assert recovered.status_code == 303
        used = await _password_sign_in(client, email, PASSWORD, codes[3])
        assert used.status_code == 401
    stored = await rows(conn, "SELECT code_hash FROM member_recovery_codes")
    assert len(stored) == 9 and all(c.encode() not in r["code_hash"] for r in stored for c in codes)


async def test_removed_member__their_session_ends_at_once_role_change_applies_next_request(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn)
    form = await make_form(conn, acme)
    dst, rte = await make_route_to(conn, acme, form)
    submission, _ = await make_delivery(
        conn, acme, form, dst, rte, target={"url": "https://x.test"}, values={"note": MARKER}
    )
    member = await make_member(conn, acme, role="operator")
    async with dashboard_client(services) as client:
        assert (await client.get(await sign_in_link(conn, member))).status_code == 303
        assert MARKER in (await client.get(f"/app/submissions/{submission}")).text
        demoted = await client.patch(
            f"/v1/members/{member}", json={"role": "viewer"}, headers=acme.headers
        )
        assert demoted.status_code == 204
        assert MARKER not in (await client.get(f"/app/submissions/{submission}")).text
        removed = await client.delete(f"/v1/members/{member}", headers=acme.headers)
        assert removed.status_code == 204
        after = await client.get("/app")
        assert after.status_code == 303 and after.headers["location"] == "/app/sign-in"
    assert await rows(conn, "SELECT id FROM dashboard_sessions") == []


async def test_sessions_page__lists_each_and_ends_another_browser(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn)
    member = await make_member(conn, acme)
    async with dashboard_client(services) as mine, dashboard_client(services) as other:
        await mine.get(await sign_in_link(conn, member), headers={"User-Agent": "Firefox/1"})
        await other.get(await sign_in_link(conn, member), headers={"User-Agent": "Chromium/2"})
        page = await mine.get("/app/sessions")
        assert "Firefox/1" in page.text and "Chromium/2" in page.text
        ends = re.findall(r'action="/app/sessions/(ses_\w+)/end"', page.text)
        query = "SELECT id FROM dashboard_sessions WHERE user_agent = 'Chromium/2'"
        [theirs] = [found["id"] for found in await rows(conn, query)]
        assert theirs in ends and len(ends) == 2
        ended = await mine.post(f"/app/sessions/{theirs}/end", data={"csrf": csrf_of(page.text)})
        assert ended.headers["location"] == "/app/sessions"
        assert (await other.get("/app")).headers["location"] == "/app/sign-in"
        assert (await mine.get("/app")).status_code == 200


async def test_switching__a_member_of_two_organizations_sees_each_and_no_other(
    services: Services, conn: Conn
) -> None:
    acme, beta, other = (
        await make_tenant(conn, name="Acme"),
        await make_tenant(conn, name="Beta"),
        await make_tenant(conn, name="Other"),
    )
    await make_form(conn, acme, name="Alpha form")
    await make_form(conn, beta, name="Beta form")
    member = await make_member(conn, acme, email="ada@example.com", role="viewer")
    await make_member(conn, beta, email="ada@example.com", role="admin")
    async with dashboard_client(services) as client:
        await client.get(await sign_in_link(conn, member))
        forms = await client.get("/app/forms")
        assert "Alpha form" in forms.text and "Beta form" not in forms.text
        assert f'<option value="{beta.org}">Beta</option>' in forms.text
        assert "New form" not in forms.text  # a viewer in Acme
        token = csrf_of(forms.text)
        switched = await client.post("/app/switch", data={"csrf": token, "organization": beta.org})
        assert switched.status_code == 303
        forms = await client.get("/app/forms")
        assert "Beta form" in forms.text and "Alpha form" not in forms.text
        assert "New form" in forms.text  # an admin in Beta
        refused = await client.post("/app/switch", data={"csrf": token, "organization": other.org})
        assert refused.status_code == 404
        assert "Beta form" in (await client.get("/app/forms")).text


async def test_viewer__pages_hold_no_submission_value_target_or_file_and_refuse_reading(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn)
    form = await make_form(conn, acme)
    target = "https://hooks.example.net/inbox-7731"
    dst, rte = await make_route_to(conn, acme, form, config={"url": target})
    submission, _ = await make_delivery(
        conn,
        acme,
        form,
        dst,
        rte,
        target={"url": target},
        values={"message": f"Call me about the {MARKER}", "email": "visitor-7731@example.org"},
    )
    pages = [
        "/app",
        f"/app/submissions/{submission}",
        "/app/destinations",
        "/app/forms",
        f"/app/forms/{form}",
        "/app/events",
        f"/app?form={form}",
    ]
    async with dashboard_client(services) as client:
        await sign_in(client, acme.key, role="operator")
        seen = {path: (await client.get(path)).text for path in pages}
        assert MARKER in seen[f"/app/submissions/{submission}"]  # the marker is there to see
    async with dashboard_client(services) as client:
        token = await sign_in(client, acme.key, role="viewer")
        for path in pages:
            response = await client.get(path)
            assert response.status_code == 200, path
            for secret in (MARKER, "visitor-7731@example.org", "inbox-7731"):
                assert secret not in response.text, (path, secret)
        settings = (await client.get(f"/app/forms/{form}")).text
        assert '<fieldset class="plain" disabled>' in settings  # shown, not enabled
        assert '<fieldset class="plain">' not in settings
        receipt = (await client.get(f"/app/submissions/{submission}")).text
        assert "Delivered" in receipt or "Waiting to send" in receipt  # states stay visible
        for forbidden in (
            f"/app/export.csv?form={form}",
            f"/app?q={MARKER}",
            f"/app/submissions/{submission}/erase",
        ):
            assert (await client.get(forbidden)).status_code == 403, forbidden
        erase = await client.post(f"/app/submissions/{submission}/erase", data={"csrf": token})
        assert erase.status_code == 403 and "operator" in erase.text
    [kept] = await rows(conn, "SELECT erased_at FROM submissions")
    assert kept["erased_at"] is None


async def test_password_reset__requests_from_one_address_are_throttled_as_sign_ins(
    services: Services, conn: Conn, smtp_server: tuple[str, list[Envelope]]
) -> None:
    acme = await make_tenant(conn)
    await make_member(conn, acme, email="ada@example.com", password=PASSWORD)
    # The windows are aligned to the clock: every attempt must fall in one.
    left = (WINDOW - (utcnow() - WINDOW_EPOCH) % WINDOW).total_seconds()
    if left < 30:
        await asyncio.sleep(left + 0.1)
    sending = mailed(services, smtp_server)
    async with dashboard_client(sending) as client:
        page = await client.get("/app/forgot")
        form = {"csrf": csrf_of(page.text), "email": "ada@example.com"}
        first = await client.post("/app/forgot", data=form)
        for _ in range(9):  # nine wrong passwords: ten attempts, the limit
            await _password_sign_in(client, "ada@example.com", "wrong horse battery")
        page = await client.get("/app/forgot")
        over = await client.post("/app/forgot", data={**form, "csrf": csrf_of(page.text)})
    assert (first.status_code, over.status_code) == (200, 429)
    assert "Too many attempts" in over.text and 1 <= int(over.headers["retry-after"]) <= 600
    await Deliverer(sending).run_pass(now=utcnow(), budget=10)
    assert len(smtp_server[1]) == 1
