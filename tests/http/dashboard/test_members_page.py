"""The members page: an owner lists members and pending invitations, invites (through a real
SMTP peer), withdraws, changes a role and removes a member; an admin neither sees the link
nor opens or posts to the page."""

from __future__ import annotations

import re

from core.platform.db import Conn
from core.platform.services import Services
from tests.support.builders import make_member, make_tenant
from tests.support.dashboard import dashboard_client, sign_in
from tests.support.mail import Smtp, link_in, mailed
from tests.support.records import rows


async def test_members_page__an_owner_invites_withdraws_changes_a_role_and_removes(
    services: Services, conn: Conn, smtp_server: Smtp
) -> None:
    acme = await make_tenant(conn)
    viewer = await make_member(conn, acme, email="vera@example.com", role="viewer")
    async with dashboard_client(mailed(services, smtp_server)) as client:
        csrf = await sign_in(client, acme.key)
        page = await client.get("/app/members")
        assert page.status_code == 200
        assert 'href="/app/members" aria-current="page"' in page.text
        assert "vera@example.com" in page.text and "No invitation is waiting" in page.text

        invited = await client.post(
            "/app/members", data={"csrf": csrf, "email": "ada@example.com", "role": "operator"}
        )
        assert invited.status_code == 303 and invited.headers["location"] == "/app/members"
        [envelope] = smtp_server[1]
        assert envelope.rcpt_tos == ["ada@example.com"]
        listed = await client.get("/app/members")
        [withdraw] = re.findall(
            r'action="(/app/members/invitations/inv_\w+/withdraw)"', listed.text
        )
        assert "ada@example.com" in listed.text
        withdrawn = await client.post(withdraw, data={"csrf": csrf})
        assert withdrawn.status_code == 303
        assert "No invitation is waiting" in (await client.get("/app/members")).text
        assert (await client.get(link_in(envelope, "/app/invitations/"))).status_code == 404

        changed = await client.post(
            f"/app/members/{viewer}/role", data={"csrf": csrf, "role": "operator"}
        )
        assert changed.status_code == 303
        [row] = await rows(conn, "SELECT role FROM memberships WHERE member_id = %(m)s", m=viewer)
        assert row["role"] == "operator"
        removed = await client.post(f"/app/members/{viewer}/remove", data={"csrf": csrf})
        assert removed.status_code == 303
        assert "vera@example.com" not in (await client.get("/app/members")).text
        forged = await client.post(f"/app/members/{viewer}/remove", data={"csrf": "x"})
        assert forged.status_code == 403
    audited = await rows(
        conn, "SELECT action FROM audit_log WHERE action <> 'member.signed_in' ORDER BY seq"
    )
    assert [r["action"] for r in audited] == [
        "member.invited",
        "invitation.withdrawn",
        "member.role_changed",
        "member.removed",
    ]


async def test_members_page__is_403_for_an_admin_and_not_in_their_navigation(
    services: Services, conn: Conn, smtp_server: Smtp
) -> None:
    acme = await make_tenant(conn)
    owner = await make_member(conn, acme, email="olga@example.com")
    async with dashboard_client(mailed(services, smtp_server)) as client:
        csrf = await sign_in(client, acme.key, role="admin")
        inbox = await client.get("/app")
        assert "/app/members" not in inbox.text
        page = await client.get("/app/members")
        assert page.status_code == 403 and "needs the owner role" in page.text
        for path, data in (
            ("/app/members", {"email": "ada@example.com", "role": "owner"}),
            (f"/app/members/{owner}/role", {"role": "viewer"}),
            (f"/app/members/{owner}/remove", {}),
        ):
            refused = await client.post(path, data={"csrf": csrf, **data})
            assert refused.status_code == 403, path
    assert smtp_server[1] == []
    assert await rows(conn, "SELECT id FROM invitations") == []
    [row] = await rows(conn, "SELECT role FROM memberships WHERE member_id = %(m)s", m=owner)
    assert row["role"] == "owner"
