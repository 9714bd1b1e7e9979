"""`/v1/invitations`: pending invitations listed and withdrawn, a re-invitation in place of the
pending one, a link refused once its sender is gone or below the invited role, the daily
bounds (counted at a real SMTP peer, raced), and expired invitations swept."""

from __future__ import annotations

import asyncio

import httpx

from core.owner.members import ADDRESS_INVITATIONS_PER_DAY, ORGANIZATION_INVITATIONS_PER_DAY
from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from core.ticks.retention import run_retention
from tests.support.api import assert_problem
from tests.support.builders import Tenant, make_member, make_tenant
from tests.support.dashboard import csrf_of, dashboard_client, sign_in
from tests.support.mail import Smtp, link_in, mailed
from tests.support.records import rows

PASSWORD = "correct horse battery"


async def _invite(
    client: httpx.AsyncClient, headers: dict[str, str], email: str, role: str = "viewer"
) -> httpx.Response:
    return await client.post("/v1/members", json={"email": email, "role": role}, headers=headers)


async def _accept(client: httpx.AsyncClient, link: str) -> httpx.Response:
    """Open the link and join with a new password (the page's answer when it is refused)."""
    page = await client.get(link)
    if page.status_code != 200:
        return page
    return await client.post(
        link, data={"csrf": csrf_of(page.text), "password": PASSWORD, "repeat": PASSWORD}
    )


async def test_invitations__listed_withdrawn_link_dead_audited_another_organizations_404(
    services: Services, conn: Conn, smtp_server: Smtp
) -> None:
    acme, other = await make_tenant(conn), await make_tenant(conn, name="Other")
    async with dashboard_client(mailed(services, smtp_server)) as client:
        sent = await _invite(client, acme.headers, "ada@example.com", "operator")
        theirs = await _invite(client, other.headers, "bob@example.com")
        link = link_in(smtp_server[1][0], "/app/invitations/")
        listed = (await client.get("/v1/invitations", headers=acme.headers)).json()
        [pending] = listed["data"]
        assert pending["id"] == sent.json()["id"]
        assert (pending["email"], pending["role"]) == ("ada@example.com", "operator")
        assert pending["invited_by"] == {
            "kind": "key",
            "id": pending["invited_by"]["id"],
            "name": "test",
        }
        assert set(pending) == {"id", "email", "role", "invited_by", "created_at", "expires_at"}
        assert link.rsplit("/", 1)[1] not in str(listed)

        not_theirs = await client.delete(
            f"/v1/invitations/{theirs.json()['id']}", headers=acme.headers
        )
        assert_problem(not_theirs, 404, "not_found")
        withdrawn = await client.delete(f"/v1/invitations/{pending['id']}", headers=acme.headers)
        assert withdrawn.status_code == 204
        again = await client.delete(f"/v1/invitations/{pending['id']}", headers=acme.headers)
        assert_problem(again, 404, "not_found")
        assert (await client.get("/v1/invitations", headers=acme.headers)).json()["data"] == []
        refused = await _accept(client, link)
        assert refused.status_code == 404 and "withdrawn" in refused.text
        audit = await client.get(
            "/v1/audit", params={"action": "invitation.withdrawn"}, headers=acme.headers
        )
        assert [row["subject"] for row in audit.json()["data"]] == [pending["id"]]
        # The other organization's invitation is still live.
        assert len((await client.get("/v1/invitations", headers=other.headers)).json()["data"]) == 1
    assert await rows(conn, "SELECT member_id FROM memberships WHERE role = 'operator'") == []


async def test_invitation__sent_again_replaces_the_pending_one(
    services: Services, conn: Conn, smtp_server: Smtp
) -> None:
    acme = await make_tenant(conn)
    async with dashboard_client(mailed(services, smtp_server)) as client:
        await _invite(client, acme.headers, "ada@example.com", "viewer")
        second = await _invite(client, acme.headers, "ADA@example.com", "admin")
        first_link, second_link = (link_in(e, "/app/invitations/") for e in smtp_server[1])
        [pending] = (await client.get("/v1/invitations", headers=acme.headers)).json()["data"]
        assert (pending["id"], pending["role"]) == (second.json()["id"], "admin")
        assert (await client.get(first_link)).status_code == 404
        assert (await _accept(client, second_link)).status_code == 303
    [joined] = await rows(conn, "SELECT role FROM memberships WHERE role <> 'owner'")
    assert joined["role"] == "admin"


async def test_invitation__refused_once_its_key_is_revoked(
    services: Services, conn: Conn, smtp_server: Smtp
) -> None:
    acme = await make_tenant(conn)
    async with dashboard_client(mailed(services, smtp_server)) as client:
        made = await client.post(
            "/v1/keys", json={"name": "hr", "role": "owner"}, headers=acme.headers
        )
        hr = {"Authorization": f"Bearer {made.json()['key']}"}
        assert (await _invite(client, hr, "ada@example.com", "admin")).status_code == 201
        assert (await _invite(client, hr, "bob@example.com", "admin")).status_code == 201
        ada, bob = (link_in(e, "/app/invitations/") for e in smtp_server[1])
        page = await client.get(ada)  # opened while the key is live
        assert page.status_code == 200
        revoked = await client.delete(f"/v1/keys/{made.json()['id']}", headers=acme.headers)
        assert revoked.status_code == 204
        posted = await client.post(
            ada, data={"csrf": csrf_of(page.text), "password": PASSWORD, "repeat": PASSWORD}
        )
        assert posted.status_code == 404 and "no longer holds" in posted.text
        opened = await client.get(bob)
        assert opened.status_code == 404 and "no longer holds" in opened.text
        assert "hr, who sent it" in opened.text
    assert await rows(conn, "SELECT member_id FROM memberships") == []


async def _member_sender(client: httpx.AsyncClient, acme: Tenant) -> tuple[str, str]:
    """Sign in as a new owner; their id and the session's CSRF token."""
    csrf = await sign_in(client, acme.key)
    listed = (await client.get("/v1/members", headers=acme.headers)).json()["data"]
    [me] = [m for m in listed if m["email"].endswith("@example.test")]
    return me["id"], csrf


async def test_invitation__refused_once_its_member_is_demoted_below_the_role_or_removed(
    services: Services, conn: Conn, smtp_server: Smtp
) -> None:
    acme = await make_tenant(conn)
    await make_member(conn, acme, email="boss@example.com")  # the owner who stays
    sending = mailed(services, smtp_server)
    async with dashboard_client(sending) as sender, dashboard_client(sending) as invitee:
        member, csrf = await _member_sender(sender, acme)
        for email, role in (("ada@example.com", "admin"), ("bob@example.com", "operator")):
            invited = await sender.post(
                "/app/members", data={"csrf": csrf, "email": email, "role": role}
            )
            assert invited.status_code == 303, invited.text
        ada, bob = (link_in(e, "/app/invitations/") for e in smtp_server[1])
        [pending, _] = (await invitee.get("/v1/invitations", headers=acme.headers)).json()["data"]
        assert pending["invited_by"]["kind"] == "member" and pending["invited_by"]["id"] == member

        demoted = await invitee.patch(
            f"/v1/members/{member}", json={"role": "operator"}, headers=acme.headers
        )
        assert demoted.status_code == 204
        refused = await _accept(invitee, ada)
        assert refused.status_code == 404 and "may no longer invite you as admin" in refused.text
        removed = await invitee.delete(f"/v1/members/{member}", headers=acme.headers)
        assert removed.status_code == 204
        gone = await _accept(invitee, bob)
        assert gone.status_code == 404 and "no longer holds" in gone.text
    joined = await rows(
        conn, "SELECT m.email FROM memberships ms JOIN members m ON m.id = ms.member_id"
    )
    assert [r["email"] for r in joined] == ["boss@example.com"]


async def test_invitation__accepted_while_its_member_still_holds_the_role(
    services: Services, conn: Conn, smtp_server: Smtp
) -> None:
    acme = await make_tenant(conn)
    sending = mailed(services, smtp_server)
    async with dashboard_client(sending) as sender, dashboard_client(sending) as invitee:
        member, csrf = await _member_sender(sender, acme)
        await sender.post(
            "/app/members", data={"csrf": csrf, "email": "ada@example.com", "role": "operator"}
        )
        await invitee.patch(f"/v1/members/{member}", json={"role": "admin"}, headers=acme.headers)
        assert (
            await _accept(invitee, link_in(smtp_server[1][0], "/app/invitations/"))
        ).status_code == 303
    assert len(await rows(conn, "SELECT 1 FROM memberships WHERE role = 'operator'")) == 1


async def test_invitations__the_fourth_to_one_address_in_a_day_is_429_and_no_email(
    services: Services, conn: Conn, smtp_server: Smtp
) -> None:
    acme = await make_tenant(conn)
    async with dashboard_client(mailed(services, smtp_server)) as client:
        answers = [await _invite(client, acme.headers, "ada@example.com") for _ in range(20)]
        others = await _invite(client, acme.headers, "bob@example.com")
    assert [a.status_code for a in answers[:ADDRESS_INVITATIONS_PER_DAY]] == [201] * 3
    for refused in answers[ADDRESS_INVITATIONS_PER_DAY:]:
        assert_problem(refused, 429, "too_many_invitations")
        assert 86_000 < int(refused.headers["retry-after"]) <= 86_400
    assert others.status_code == 201
    # 20 asked for ada, 3 emails reached the peer (then bob's).
    assert [e.rcpt_tos for e in smtp_server[1]] == [["ada@example.com"]] * 3 + [["bob@example.com"]]
    stored = await rows(conn, "SELECT email FROM invitations ORDER BY id")
    assert [r["email"] for r in stored] == ["ada@example.com"] * 3 + ["bob@example.com"]


async def test_invitations__raced_to_one_address_only_the_daily_bound_is_sent(
    services: Services, conn: Conn, smtp_server: Smtp
) -> None:
    """Each invitation counts the day's under the organization's lock: eight at once send
    three."""
    acme = await make_tenant(conn)
    async with dashboard_client(mailed(services, smtp_server)) as client:
        answers = await asyncio.gather(
            *(_invite(client, acme.headers, "ada@example.com") for _ in range(8))
        )
    assert sorted(a.status_code for a in answers) == [201] * 3 + [429] * 5
    assert len(smtp_server[1]) == ADDRESS_INVITATIONS_PER_DAY
    assert len(await rows(conn, "SELECT id FROM invitations")) == ADDRESS_INVITATIONS_PER_DAY


async def test_invitations__past_the_organizations_daily_bound_is_429_and_no_email(
    services: Services, conn: Conn, smtp_server: Smtp
) -> None:
    acme, other = await make_tenant(conn), await make_tenant(conn, name="Other")
    async with dashboard_client(mailed(services, smtp_server)) as client:
        for n in range(ORGANIZATION_INVITATIONS_PER_DAY):
            sent = await _invite(client, acme.headers, f"person{n}@example.com")
            assert sent.status_code == 201, sent.text
        refused = await _invite(client, acme.headers, "one-more@example.com")
        assert_problem(refused, 429, "too_many_invitations")
        elsewhere = await _invite(client, other.headers, "one-more@example.com")
        assert elsewhere.status_code == 201
    assert len(smtp_server[1]) == ORGANIZATION_INVITATIONS_PER_DAY + 1
    assert "one-more@example.com" not in [
        r["email"]
        for r in await rows(
            conn, "SELECT email FROM invitations WHERE organization_id = %(o)s", o=acme.org
        )
    ]
    # A day later the organization may invite again.
    await conn.execute("UPDATE invitations SET created_at = created_at - interval '1 day'")
    async with dashboard_client(mailed(services, smtp_server)) as client:
        assert (await _invite(client, acme.headers, "one-more@example.com")).status_code == 201


async def test_retention__sweeps_expired_invitations_and_keeps_live_ones(
    services: Services, conn: Conn, smtp_server: Smtp
) -> None:
    acme = await make_tenant(conn)
    await make_member(conn, acme)
    async with dashboard_client(mailed(services, smtp_server)) as client:
        old = (await _invite(client, acme.headers, "old@example.com")).json()["id"]
        live = (await _invite(client, acme.headers, "new@example.com")).json()["id"]
        await conn.execute(
            "UPDATE invitations SET created_at = now() - interval '8 days',"
            " expires_at = now() - interval '1 day' WHERE id = %(id)s",
            {"id": old},
        )
        stats = await run_retention(services, now=utcnow(), budget=10)
        assert stats["invitations_swept"] == 1
        assert [r["id"] for r in await rows(conn, "SELECT id FROM invitations")] == [live]
        assert (
            await client.get(link_in(smtp_server[1][0], "/app/invitations/"))
        ).status_code == 404
