"""`/v1/members`: listing, roles, removal, and the last owner's rules, raced."""

from __future__ import annotations

import asyncio

from core.platform.db import Conn
from core.platform.services import Services
from tests.support.api import api_client, assert_problem
from tests.support.builders import make_member, make_tenant
from tests.support.records import rows


async def test_members__listed_with_roles_changed_removed_another_organizations_are_404(
    services: Services, conn: Conn
) -> None:
    acme, other = await make_tenant(conn), await make_tenant(conn, name="Other")
    owner = await make_member(conn, acme, email="owner@example.com", password="a" * 12)
    viewer = await make_member(conn, acme, email="viewer@example.com", role="viewer")
    stranger = await make_member(conn, other, email="stranger@example.com")
    async with api_client(services) as client:
        listed = (await client.get("/v1/members", headers=acme.headers)).json()
        assert {(m["id"], m["email"], m["role"]) for m in listed["data"]} == {
            (owner, "owner@example.com", "owner"),
            (viewer, "viewer@example.com", "viewer"),
        }
        assert "argon2" not in str(listed) and "password" not in str(listed)
        changed = await client.patch(
            f"/v1/members/{viewer}", json={"role": "admin"}, headers=acme.headers
        )
        assert changed.status_code == 204
        bad_role = await client.patch(
            f"/v1/members/{viewer}", json={"role": "root"}, headers=acme.headers
        )
        assert_problem(bad_role, 422, "invalid_input")
        theirs = await client.patch(
            f"/v1/members/{stranger}", json={"role": "viewer"}, headers=acme.headers
        )
        assert_problem(theirs, 404, "not_found")
        assert_problem(
            await client.delete(f"/v1/members/{stranger}", headers=acme.headers), 404, "not_found"
        )
        assert_problem(
            await client.delete("/v1/members/mem_nope", headers=acme.headers), 404, "not_found"
        )
        removed = await client.delete(f"/v1/members/{viewer}", headers=acme.headers)
        assert removed.status_code == 204
    left = await rows(conn, "SELECT organization_id, member_id, role FROM memberships ORDER BY 1")
    assert sorted((r["organization_id"], r["member_id"], r["role"]) for r in left) == sorted(
        [(acme.org, owner, "owner"), (other.org, stranger, "owner")]
    )


async def test_last_owner__cannot_leave_or_be_demoted_until_another_owner_exists(
    services: Services, conn: Conn
) -> None:
    acme = await make_tenant(conn)
    owner = await make_member(conn, acme)
    admin = await make_member(conn, acme, role="admin")
    async with api_client(services) as client:
        demote = await client.patch(
            f"/v1/members/{owner}", json={"role": "admin"}, headers=acme.headers
        )
        assert_problem(demote, 409, "last_owner")
        leave = await client.delete(f"/v1/members/{owner}", headers=acme.headers)
        assert_problem(leave, 409, "last_owner")
        promoted = await client.patch(
            f"/v1/members/{admin}", json={"role": "owner"}, headers=acme.headers
        )
        assert promoted.status_code == 204
        left = await client.delete(f"/v1/members/{owner}", headers=acme.headers)
        assert left.status_code == 204
        assert_problem(
            await client.delete(f"/v1/members/{admin}", headers=acme.headers), 409, "last_owner"
        )


async def test_last_owner__two_owners_demoting_each_other_at_once_leave_one(
    services: Services, conn: Conn
) -> None:
    """Each change locks the organization's owners first: the second sees the first."""
    acme = await make_tenant(conn)
    owners = [await make_member(conn, acme) for _ in range(2)]
    async with api_client(services) as client:
        for _ in range(5):
            answers = await asyncio.gather(
                *(
                    client.patch(f"/v1/members/{m}", json={"role": "viewer"}, headers=acme.headers)
                    for m in owners
                )
            )
            assert sorted(a.status_code for a in answers) == [204, 409]
            still = await rows(conn, "SELECT member_id FROM memberships WHERE role = 'owner'")
            assert len(still) == 1
            await conn.execute("UPDATE memberships SET role = 'owner'")
