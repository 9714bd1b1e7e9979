"""The pages a team needs: API keys (made with a role, shown once, revoked), invitations
sent again, the development mailbox (`POSTBAG_EMAIL_PROVIDER=dev`) catching an invitation
whose link works, and the log provider's refusal naming what to set; links and forms a role
cannot use are not shown or say why."""

from __future__ import annotations

import re

import httpx

from core.http.api_app import create_api_app
from core.platform.db import Conn
from core.platform.services import Services
from tests.support.api import assert_problem
from tests.support.builders import make_tenant
from tests.support.dashboard import dashboard_client, sign_in
from tests.support.records import rows
from tests.support.settings import with_settings

_INVITATION = re.compile(r"http://127\.0\.0\.1:8080(/app/invitations/[\w-]+)")


async def test_keys_page__an_admin_makes_a_key_shown_once_that_works_then_revokes_it(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn)
    async with dashboard_client(services) as client:
        csrf = await sign_in(client, acme.key, role="admin")
        page = await client.get("/app/keys")
        assert page.status_code == 200
        assert 'href="/app/keys" aria-current="page"' in page.text
        # An admin may not hand out the owner role: the option says why and is refused.
        assert '<option value="owner" disabled>owner (above your role)</option>' in page.text
        refused = await client.post(
            "/app/keys", data={"csrf": csrf, "name": "Boss", "role": "owner"}
        )
        assert refused.status_code == 403 and "needs the owner role" in refused.text
        made = await client.post(
            "/app/keys", data={"csrf": csrf, "name": "CRM sync", "role": "operator"}
        )
        assert made.status_code == 200 and made.headers["cache-control"] == "no-store"
        found = re.search(r'<code id="new-key-secret">(pb_[\w-]+)</code>', made.text)
        assert found, made.text
        secret = found.group(1)
        headers = {"Authorization": f"Bearer {secret}"}
        assert (await client.get("/v1/forms", headers=headers)).status_code == 200
        # Listed by name and prefix only, never again in full.
        listed = await client.get("/app/keys")
        assert "CRM sync" in listed.text and secret[:10] in listed.text
        assert secret not in listed.text
        [revoke] = re.findall(r'action="(/app/keys/key_\w+/revoke)"', listed.text)
        revoked = await client.post(revoke, data={"csrf": csrf})
        assert revoked.status_code == 303 and revoked.headers["location"] == "/app/keys"
        assert (await client.get("/v1/forms", headers=headers)).status_code == 401
        # The tenant's own owner key is above an admin: no Revoke button, a reason instead.
        after = await client.get("/app/keys")
        assert "Only an owner may revoke a key with the owner role; yours is admin." in after.text
    audited = await rows(conn, "SELECT action, subject FROM audit_log ORDER BY seq")
    assert [r["action"] for r in audited if r["action"] != "member.signed_in"] == [
        "key.created",
        "key.revoked",
    ]


async def test_navigation__shows_only_the_pages_the_role_opens(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn)
    expected = {
        "viewer": set(),
        "operator": set(),
        "admin": {"/app/keys", "/app/audit"},
        "owner": {"/app/keys", "/app/audit", "/app/members"},
    }
    for role, links in expected.items():
        async with dashboard_client(services) as client:
            await sign_in(client, acme.key, role=role)  # type: ignore[arg-type]
            nav = (await client.get("/app")).text.split("</nav>")[0]
            shown = {p for p in ("/app/keys", "/app/audit", "/app/members") if p in nav}
            assert shown == links, role
            for path in {"/app/keys", "/app/audit", "/app/members"} - links:
                assert (await client.get(path)).status_code == 403, (role, path)


async def test_dev_mailbox__catches_the_invitation_sent_again_and_its_link_works(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn, name="Bike shop")
    dev = with_settings(services, email_provider="dev")
    address = "ada-mailbox@example.com"
    async with dashboard_client(dev) as client:
        csrf = await sign_in(client, acme.key)
        invited = await client.post(
            "/app/members", data={"csrf": csrf, "email": address, "role": "operator"}
        )
        assert invited.status_code == 303
        members = await client.get("/app/members")
        assert 'the invitation lands in the <a href="/app/dev/mail">' in members.text
        [resend] = re.findall(r'action="(/app/members/invitations/inv_\w+/resend)"', members.text)
        again = await client.post(resend, data={"csrf": csrf})
        assert again.status_code == 303
        client.cookies.clear()  # the teammate reads the mailbox without an account
        mailbox = await client.get("/app/dev/mail")
        assert mailbox.status_code == 200
        assert mailbox.headers["referrer-policy"] == "no-referrer"
        assert mailbox.text.count(address) == 2
        assert "You are invited to “Bike shop” on Postbag" in mailbox.text
        # Newest first; each link is in an anchor's address and its text.
        newest, oldest = dict.fromkeys(_INVITATION.findall(mailbox.text))
        # Sent again: the first link stopped working, the new one opens the join page.
        assert (await client.get(oldest)).status_code == 404
        joined = await client.get(newest)
        assert joined.status_code == 200 and "Join" in joined.text
    # Its links let anyone in: a client on another machine finds no mailbox.
    elsewhere = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=create_api_app(dev), client=("203.0.113.9", 4000)),
        base_url="http://127.0.0.1:8080",
    )
    async with elsewhere:
        assert (await elsewhere.get("/app/dev/mail")).status_code == 404
    audited = await rows(conn, "SELECT action FROM audit_log ORDER BY seq")
    assert [r["action"] for r in audited if r["action"] != "member.signed_in"] == [
        "member.invited",
        "invitation.resent",
    ]
    pending = await rows(conn, "SELECT id FROM invitations WHERE withdrawn_at IS NULL")
    assert len(pending) == 1


async def test_dev_mailbox__absent_with_another_provider_whose_refusal_names_what_to_set(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn)
    async with dashboard_client(services) as client:  # the `log` provider
        assert (await client.get("/app/dev/mail")).status_code == 404
        refused = await client.post(
            "/v1/members",
            json={"email": "ada@example.com", "role": "viewer"},
            headers=acme.headers,
        )
    body = assert_problem(refused, 503, "email_not_sent")
    for variable in ("POSTBAG_EMAIL_PROVIDER", "POSTBAG_MAIL_FROM", "POSTBAG_SMTP_URL"):
        assert variable in body["detail"]


async def test_members_page__the_only_owner_is_told_why_their_role_cannot_change(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn)
    async with dashboard_client(services) as client:
        csrf = await sign_in(client, acme.key)
        page = await client.get("/app/members")
        assert "The only owner: make another member an owner" in page.text
        [me] = re.findall(r'id="member-(mem_\w+)"', page.text)
        demoted = await client.post(
            f"/app/members/{me}/role", data={"csrf": csrf, "role": "viewer"}
        )
        assert demoted.status_code == 409


async def test_greyed_out_forms__say_which_roles_may_use_them(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn)
    async with dashboard_client(services) as client:
        await sign_in(client, acme.key, role="viewer")
        for path, why in (
            ("/app/forms", "Only admins and owners create forms; your role is viewer."),
            (
                "/app/destinations",
                "Only admins and owners add, change or delete destinations; your role is viewer.",
            ),
            ("/app/streams", "Only admins and owners create streams; your role is viewer."),
            (
                "/app/alerts",
                "Only admins and owners change where notices go; your role is viewer.",
            ),
        ):
            page = await client.get(path)
            assert page.status_code == 200 and why in page.text, path
    async with dashboard_client(services) as client:
        await sign_in(client, acme.key, role="admin")
        for path in ("/app/forms", "/app/destinations", "/app/streams", "/app/alerts"):
            assert 'class="hint why"' not in (await client.get(path)).text, path
