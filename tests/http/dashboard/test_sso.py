"""Single sign-on and sign-in policy (docs/sso.md): against a real OpenID Connect provider
(`oidc-provider` from npm, tests/support/oidc.py) the first sign-in makes the member with the
default role, keys rotated by the provider are fetched again, a domain not allowed, a state
not this browser's or used twice, a token of another nonce, audience or past its time are
refused, and a provider saying no at the next refresh ends the session; without one,
`sso_required` refuses the password form (but a break-glass owner), `two_factor_required`
sends members to set it up first, and idle and absolute timeouts end sessions."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pyotp
import pytest
from joserfc import jwt
from joserfc.jwk import RSAKey

from core.owner.sso import verify_id_token
from core.platform.db import Conn
from core.platform.errors import SsoRefused
from core.platform.services import Services
from tests.support.api import api_client, assert_problem
from tests.support.builders import Tenant, make_member, make_tenant, sign_in_link
from tests.support.dashboard import DashboardClient, csrf_of, dashboard_client, sign_in
from tests.support.oidc import (
    OidcProvider,
    running_provider,
    sso_redirect,
    sso_sign_in,
    through_provider,
)
from tests.support.records import rows

PASSWORD = "correct horse battery"


@pytest.fixture
def oidc_provider(tmp_path: Path) -> Iterator[OidcProvider]:
    with running_provider(tmp_path) as provider:
        yield provider


async def _configure(
    services: Services, tenant: Tenant, settings: dict[str, Any]
) -> dict[str, Any]:
    async with api_client(services, tenant.key) as client:
        answer = await client.put("/v1/organization/sso", json=settings)
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


async def _policy(services: Services, tenant: Tenant, **policy: Any) -> httpx.Response:
    async with api_client(services, tenant.key) as client:
        return await client.put("/v1/organization/policy", json=policy)


async def _actions(conn: Conn, tenant: Tenant) -> list[tuple[str, str | None]]:
    found = await rows(
        conn,
        "SELECT action, subject FROM audit_log WHERE organization_id = %(o)s ORDER BY seq",
        o=tenant.org,
    )
    return [(row["action"], row["subject"]) for row in found]


@pytest.mark.slow
async def test_first_sign_in_joins_with_the_default_role_and_rotated_keys_are_fetched_again(
    services: Services, conn: Conn, oidc_provider: OidcProvider
) -> None:
    tenant = await make_tenant(conn)
    shown = await _configure(services, tenant, oidc_provider.settings("postbag-a", ["acme.test"]))
    assert shown["has_client_secret"] is True and "client_secret" not in shown
    assert shown["redirect_uri"] == "http://127.0.0.1:8080/app/sso/callback"

    async with dashboard_client(services) as dashboard:
        back = await sso_sign_in(dashboard, "Ada@Acme.test")
        assert back.status_code == 303, back.text
        assert back.headers["location"] == "/app"
        inbox = await dashboard.get("/app")
        assert inbox.status_code == 200
    [member] = await rows(
        conn,
        "SELECT m.id, m.email, ms.role, m.password_hash FROM members m"
        " JOIN memberships ms ON ms.member_id = m.id WHERE ms.organization_id = %(o)s",
        o=tenant.org,
    )
    assert (member["email"], member["role"], member["password_hash"]) == (
        "Ada@Acme.test",  # as the provider says it
        "viewer",
        None,
    )
    assert _actions_tail(await _actions(conn, tenant)) == [
        ("member.joined", member["id"]),
        ("member.signed_in", member["id"]),
    ]

    # The member also belongs to another organization: this session stays in the one whose
    # provider signed them in.
    other = await make_tenant(conn, "Other")
    await make_member(conn, other, role="owner", email="Ada@Acme.test")
    async with dashboard_client(services) as dashboard:
        assert (await sso_sign_in(dashboard, "ada@acme.test")).status_code == 303
        token = csrf_of((await dashboard.get("/app")).text)
        moved = await dashboard.post("/app/switch", data={"csrf": token, "organization": other.org})
        assert moved.status_code == 404

    await oidc_provider.rotate()  # the provider signs with a key Postbag has not fetched
    async with dashboard_client(services) as dashboard:
        again = await sso_sign_in(dashboard, "ada@acme.test")
        assert again.status_code == 303, again.text
    assert _actions_tail(await _actions(conn, tenant), 1) == [("member.signed_in", member["id"])]
    [count] = await rows(
        conn, "SELECT count(*) AS n FROM memberships WHERE organization_id = %(o)s", o=tenant.org
    )
    assert count["n"] == 1


def _actions_tail(
    actions: list[tuple[str, str | None]], n: int = 2
) -> list[tuple[str, str | None]]:
    return actions[-n:]


@pytest.mark.slow
async def test_refused_domain_state_and_replay(
    services: Services, conn: Conn, oidc_provider: OidcProvider
) -> None:
    tenant = await make_tenant(conn)
    await _configure(services, tenant, oidc_provider.settings("postbag-a", ["acme.test"]))
    async with dashboard_client(services) as dashboard:
        unknown = await sso_redirect(dashboard, "ada@elsewhere.test")
        assert unknown.status_code == 404

        # The provider signs in someone of another domain (the address typed was the
        # organization's): refused, recorded, no member made.
        started = await sso_redirect(dashboard, "mallory@acme.test")
        back = await through_provider(
            started.headers["location"].replace(
                "login_hint=mallory%40acme.test", "login_hint=mallory%40evil.test"
            )
        )
        parts = urlsplit(back)
        refused = await dashboard.get(f"{parts.path}?{parts.query}")
        assert refused.status_code == 403, refused.text
        assert "pb_session" not in refused.cookies
        assert ("sso.sign_in_refused", "domain_not_allowed") in await _actions(conn, tenant)
        assert await rows(conn, "SELECT id FROM members") == []

        # A state this browser did not start: refused before the code is used.
        started = await sso_redirect(dashboard, "ada@acme.test")
        back = await through_provider(started.headers["location"])
        query = parse_qs(urlsplit(back).query)
        forged = await dashboard.get(
            "/app/sso/callback", params={"code": query["code"][0], "state": "forged" * 8}
        )
        assert forged.status_code == 403
        # The real state works once; the same answer replayed is refused.
        parts = urlsplit(back)
        assert (await dashboard.get(f"{parts.path}?{parts.query}")).status_code == 303
    async with dashboard_client(services) as other:
        other.cookies.set("pb_sso", query["state"][0], path="/app")
        replayed = await other.get(f"{parts.path}?{parts.query}")
        assert replayed.status_code == 403
        assert "used or has expired" in replayed.text


@pytest.mark.slow
async def test_id_tokens_of_another_nonce_audience_or_time_are_refused(
    services: Services, conn: Conn, oidc_provider: OidcProvider
) -> None:
    tenant = await make_tenant(conn)
    await _configure(services, tenant, oidc_provider.settings("postbag-a", ["acme.test"]))
    [sso] = await rows(
        conn,
        "SELECT organization_id, issuer, client_id, client_secret, scopes, default_role"
        " FROM organization_sso",
    )
    now = datetime.now(UTC)
    key = oidc_provider.keys[0]

    def token(**claims: Any) -> str:
        base = {
            "iss": oidc_provider.issuer,
            "sub": "ada@acme.test",
            "aud": "postbag-a",
            "nonce": "n-1",
            "iat": int(now.timestamp()),
            "exp": int(now.timestamp()) + 300,
            "email": "ada@acme.test",
        }
        return jwt.encode({"alg": "RS256", "kid": key.kid}, {**base, **claims}, key)

    good = await verify_id_token(services, sso, token(), nonce="n-1", now=now)
    assert good["email"] == "ada@acme.test"
    for bad, when in (
        (token(nonce="n-2"), now),
        (token(aud="postbag-b"), now),
        (token(aud=["postbag-a", "postbag-b"]), now),  # no azp naming us
        (token(iss="https://idp.example"), now),
        (token(), now + timedelta(minutes=10)),  # expired: time travel past exp + leeway
    ):
        with pytest.raises(SsoRefused, match=r"not valid here|another client"):
            await verify_id_token(services, sso, bad, nonce="n-1", now=when)
    # Signed by a key the provider does not hold, under its key's id or another: refused
    # (the other after fetching the provider's keys again).
    for kid in ("k1", "k9"):
        stranger = RSAKey.generate_key(2048, parameters={"kid": kid})
        forged = jwt.encode({"alg": "RS256", "kid": kid}, {"iss": oidc_provider.issuer}, stranger)
        with pytest.raises(SsoRefused, match="signature"):
            await verify_id_token(services, sso, forged, nonce="n-1", now=now)


@pytest.mark.slow
async def test_a_provider_saying_no_at_the_next_refresh_ends_the_session(
    services: Services, conn: Conn, oidc_provider: OidcProvider
) -> None:
    tenant = await make_tenant(conn)
    await _configure(services, tenant, oidc_provider.settings("postbag-a", ["acme.test"]))
    async with dashboard_client(services) as dashboard:
        assert (await sso_sign_in(dashboard, "ada@acme.test")).status_code == 303
        [session] = await rows(conn, "SELECT sso_refresh_token FROM dashboard_sessions")
        assert session["sso_refresh_token"]
        await _age_sso_check(conn)
        assert (await dashboard.get("/app")).status_code == 200  # the provider said yes
        await oidc_provider.disable("ada@acme.test")
        assert (await dashboard.get("/app")).status_code == 200  # not due again yet
        await _age_sso_check(conn)
        gone = await dashboard.get("/app")
        assert (gone.status_code, gone.headers["location"]) == (303, "/app/sign-in")
    assert await rows(conn, "SELECT id FROM dashboard_sessions") == []


async def _age_sso_check(conn: Conn) -> None:
    """Time travel: the provider was last asked six minutes ago."""
    await conn.execute(
        "UPDATE dashboard_sessions SET sso_checked_at = sso_checked_at - interval '6 minutes'"
    )


async def _password_sign_in(client: DashboardClient, email: str) -> httpx.Response:
    page = await client.get("/app/sign-in")
    return await client.post(
        "/app/sign-in",
        data={"csrf": csrf_of(page.text), "email": email, "password": PASSWORD, "code": ""},
    )


async def test_sso_required_refuses_the_password_form_but_a_break_glass_owner(
    services: Services, conn: Conn
) -> None:
    tenant = await make_tenant(conn)
    admin = await make_member(conn, tenant, role="admin", email="ad@acme.test", password=PASSWORD)
    owner = await make_member(conn, tenant, role="owner", email="ow@acme.test", password=PASSWORD)
    assert_problem(await _policy(services, tenant, sso_required=True), 422, "invalid_input")
    await _configure(
        services,
        tenant,
        {"issuer": "http://127.0.0.1:9", "client_id": "c", "allowed_domains": ["acme.test"]},
    )
    async with dashboard_client(services) as before:
        assert (await _password_sign_in(before, "ad@acme.test")).status_code == 303
        assert (await before.get("/app")).status_code == 200
        refused = await _policy(services, tenant, sso_required=True, break_glass=[admin])
        assert_problem(refused, 422, "invalid_input")  # only owners are break-glass
        on = await _policy(services, tenant, sso_required=True, break_glass=[owner])
        assert on.status_code == 200, on.text
        assert on.json()["break_glass"] == [owner]
        # The password session opened before ends at its next request.
        assert (await before.get("/app")).headers["location"] == "/app/sign-in"
    async with dashboard_client(services) as admin_client:
        answer = await _password_sign_in(admin_client, "ad@acme.test")
        assert answer.status_code == 403
        assert "single sign-on" in answer.text
        assert "pb_session" not in answer.cookies
    async with dashboard_client(services) as owner_client:
        assert (await _password_sign_in(owner_client, "ow@acme.test")).status_code == 303
        assert (await owner_client.get("/app")).status_code == 200
    assert ("organization.policy_updated", tenant.org) in await _actions(conn, tenant)


async def test_two_factor_required_sends_members_to_set_it_up_first(
    services: Services, conn: Conn
) -> None:
    tenant = await make_tenant(conn)
    on = await _policy(services, tenant, two_factor_required=True)
    assert on.status_code == 200, on.text
    async with dashboard_client(services) as dashboard:
        await sign_in_without_csrf(dashboard, tenant)
        for path in ("/app", "/app/forms", "/app/sessions"):
            sent = await dashboard.get(path)
            assert (sent.status_code, sent.headers["location"]) == (303, "/app/two-factor")
        setup = await dashboard.get("/app/two-factor")
        assert setup.status_code == 200
        token = csrf_of(setup.text)
        await dashboard.post("/app/two-factor/start", data={"csrf": token})
        secret = re.search(
            r'class="totp-secret">([A-Z2-7]+)<', (await dashboard.get("/app/two-factor")).text
        )
        assert secret is not None
        code = pyotp.TOTP(secret.group(1)).at(time.time())
        confirmed = await dashboard.post(
            "/app/two-factor/confirm", data={"csrf": token, "code": code}
        )
        assert confirmed.status_code in (200, 303), confirmed.text
        assert (await dashboard.get("/app")).status_code == 200


async def sign_in_without_csrf(dashboard: DashboardClient, tenant: Tenant) -> None:
    """Signed in through a one-time link (the inbox is not reached: the policy's redirect)."""
    async with dashboard.services.db.connection() as conn:
        member = await make_member(conn, tenant, role="admin")
        link = await sign_in_link(conn, member)
    assert (await dashboard.get(link)).status_code == 303


async def test_idle_and_absolute_timeouts_end_sessions(services: Services, conn: Conn) -> None:
    tenant = await make_tenant(conn)
    on = await _policy(services, tenant, session_idle_minutes=15, session_absolute_hours=8)
    assert on.status_code == 200, on.text
    async with dashboard_client(services) as dashboard:
        await sign_in(dashboard, tenant.key, role="viewer")
        await conn.execute(
            "UPDATE dashboard_sessions SET last_seen_at = now() - interval '14 minutes'"
        )
        assert (await dashboard.get("/app")).status_code == 200
        await conn.execute(
            "UPDATE dashboard_sessions SET last_seen_at = now() - interval '16 minutes'"
        )
        assert (await dashboard.get("/app")).headers["location"] == "/app/sign-in"
    async with dashboard_client(services) as dashboard:
        await sign_in(dashboard, tenant.key, role="viewer")
        await conn.execute(
            "UPDATE dashboard_sessions SET created_at = now() - interval '8 hours 1 minute'"
        )
        assert (await dashboard.get("/app")).headers["location"] == "/app/sign-in"


async def test_sso_settings_are_the_owners_the_secret_write_only_domains_one_organizations(
    services: Services, conn: Conn
) -> None:
    tenant = await make_tenant(conn)
    other = await make_tenant(conn, "Other")
    settings = {
        "issuer": "http://127.0.0.1:9",
        "client_id": "c",
        "client_secret": "s3cr3t-value",
        "allowed_domains": ["Acme.test", "acme.test"],
    }
    shown = await _configure(services, tenant, settings)
    assert shown["allowed_domains"] == ["acme.test"]
    assert "s3cr3t-value" not in str(shown)
    kept = await _configure(services, tenant, {**settings, "client_secret": None})
    assert kept["has_client_secret"] is True
    async with api_client(services, other.key) as client:
        taken = await client.put("/v1/organization/sso", json=settings)
        assert_problem(taken, 409, "domain_taken")
        assert (await client.get("/v1/organization/sso")).json()["configured"] is False
        admin = await client.post("/v1/keys", json={"name": "a", "role": "admin"})
    async with api_client(services, admin.json()["key"]) as as_admin:
        assert_problem(await as_admin.get("/v1/organization/sso"), 403, "forbidden")
    async with api_client(services, tenant.key) as client:
        bad = await client.put("/v1/organization/sso", json={**settings, "allowed_domains": ["x"]})
        assert_problem(bad, 422, "invalid_input")
        assert (await client.delete("/v1/organization/sso")).status_code == 204
    assert [a for a, _ in await _actions(conn, tenant)].count("sso.updated") == 2
    assert ("sso.removed", tenant.org) in await _actions(conn, tenant)


async def test_the_organization_page_sets_sso_and_the_policy_for_owners_only(
    services: Services, conn: Conn
) -> None:
    tenant = await make_tenant(conn)
    async with dashboard_client(services) as viewer:
        await sign_in(viewer, tenant.key, role="viewer")
        assert (await viewer.get("/app/organization")).status_code == 403
    async with dashboard_client(services) as owner:
        token = await sign_in(owner, tenant.key, role="owner")
        shown = await owner.get("/app/organization")
        assert shown.status_code == 200
        assert "http://127.0.0.1:8080/app/sso/callback" in shown.text
        saved = await owner.post(
            "/app/organization/sso",
            data={
                "csrf": token,
                "issuer": "http://127.0.0.1:9",
                "client_id": "postbag",
                "client_secret": "page-secret-1",
                "allowed_domains": "acme.test, acme.example",
                "default_role": "operator",
                "scopes": "",
            },
        )
        assert saved.status_code == 303, saved.text
        again = await owner.get("/app/organization")
        assert "acme.example acme.test" in again.text and "page-secret-1" not in again.text
        bad = await owner.post(
            "/app/organization/policy", data={"csrf": token, "session_idle_minutes": "1"}
        )
        assert bad.status_code == 422
        policy = await owner.post(
            "/app/organization/policy",
            data={"csrf": token, "two_factor_required": "on", "session_idle_minutes": "30"},
        )
        assert policy.status_code == 303, policy.text
        # The owner signed in without TOTP: now sent to set it up first.
        assert (await owner.get("/app/organization")).headers["location"] == "/app/two-factor"
    [row] = await rows(
        conn,
        "SELECT s.default_role, s.client_secret, o.two_factor_required, o.session_idle_minutes"
        " FROM organization_sso s JOIN organizations o ON o.id = s.organization_id",
    )
    assert row == {
        "default_role": "operator",
        "client_secret": "page-secret-1",
        "two_factor_required": True,
        "session_idle_minutes": 30,
    }
