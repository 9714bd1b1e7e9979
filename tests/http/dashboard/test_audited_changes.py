"""A change made through the dashboard and its audit row commit together or not at all."""

from __future__ import annotations

from aiosmtpd.smtp import Envelope

from core.platform.db import Conn
from core.platform.services import Services
from tests.support.builders import (
    make_destination,
    make_form,
    make_member,
    make_submission,
    make_tenant,
    sign_in_link,
)
from tests.support.dashboard import csrf_of, dashboard_client
from tests.support.mail import link_in, mailed
from tests.support.records import failing_audit, rows


async def _stored(conn: Conn) -> dict[str, int]:
    counted = await rows(
        conn,
        "SELECT (SELECT count(*) FROM forms WHERE deleted_at IS NULL) AS forms,"
        " (SELECT count(*) FROM destination_secrets) AS secrets,"
        " (SELECT count(*) FROM dashboard_sessions) AS sessions,"
        " (SELECT count(*) FROM audit_log) AS audit",
    )
    return counted[0]


async def test_a_dashboard_change_and_its_audit_row_commit_together_or_not_at_all(
    services: Services, conn: Conn
) -> None:
    tenant = await make_tenant(conn)
    destination = await make_destination(conn, tenant)
    member = await make_member(conn, tenant)
    async with dashboard_client(services) as mine, dashboard_client(services) as other:
        assert (await mine.get(await sign_in_link(conn, member))).status_code == 303
        assert (await other.get(await sign_in_link(conn, member))).status_code == 303
        csrf = csrf_of((await mine.get("/app")).text)
        query = "SELECT id FROM dashboard_sessions ORDER BY created_at DESC LIMIT 1"
        theirs = (await rows(conn, query))[0]["id"]
        # A create (its row names what it made: the redirect's id), a destination change
        # recorded as its secret's rotation, and the end of the member's other session
        # (their own rows, which span their organizations).
        changes = [
            ("/app/forms", {"name": "Survey"}, "forms", "form.created", None),
            (
                f"/app/destinations/{destination}",
                {"secret": "a-rotated-webhook-secret-0001"},
                "secrets",
                "destination.secret_rotated",
                destination,
            ),
            (f"/app/sessions/{theirs}/end", {}, "sessions", "session.revoked", theirs),
        ]
        for path, posted, table, action, subject in changes:
            before = await _stored(conn)
            async with failing_audit(conn):
                failed = await mine.post(path, data={"csrf": csrf, **posted})
                assert failed.status_code == 503, (path, failed.text)
                assert "Postbag is unavailable" in failed.text
                assert await _stored(conn) == before, path

            made = await mine.post(path, data={"csrf": csrf, **posted})
            assert made.status_code == 303, (path, made.text)
            after = await _stored(conn)
            assert after["audit"] == before["audit"] + 1, path
            assert after[table] != before[table], path
            [row] = await rows(
                conn, "SELECT action, subject FROM audit_log ORDER BY seq DESC LIMIT 1"
            )
            subject = subject or made.headers["location"].rsplit("/", 1)[-1]
            assert (row["action"], row["subject"]) == (action, subject), path


async def test_joining_by_invitation_and_its_audit_row_commit_together_or_not_at_all(
    services: Services, conn: Conn, smtp_server: tuple[str, list[Envelope]]
) -> None:
    acme = await make_tenant(conn)
    async with dashboard_client(mailed(services, smtp_server)) as client:
        invited = await client.post(
            "/v1/members",
            json={"email": "ada@example.com", "role": "operator"},
            headers=acme.headers,
        )
        assert invited.status_code == 201, invited.text
        link = link_in(smtp_server[1][0], "/app/invitations/")
        joining = {"password": "correct horse battery", "repeat": "correct horse battery"}

        async with failing_audit(conn):
            page = await client.get(link)
            failed = await client.post(link, data={"csrf": csrf_of(page.text), **joining})
            assert failed.status_code == 503, failed.text
            assert await rows(conn, "SELECT * FROM memberships WHERE role = 'operator'") == []

        page = await client.get(link)
        assert page.status_code == 200, "the link still works: nothing was used"
        joined = await client.post(link, data={"csrf": csrf_of(page.text), **joining})
        assert joined.status_code == 303, joined.text
    [member] = await rows(conn, "SELECT member_id FROM memberships WHERE role = 'operator'")
    # Joined, then signed in by the same page.
    recorded = await rows(
        conn, "SELECT action, subject, actor_id, via FROM audit_log ORDER BY seq DESC LIMIT 2"
    )
    assert recorded == [
        {
            "action": action,
            "subject": member["member_id"],
            "actor_id": member["member_id"],
            "via": "dashboard",
        }
        for action in ("member.signed_in", "member.joined")
    ]


async def test_sign_ins_and_failed_ones_are_recorded(services: Services, conn: Conn) -> None:
    tenant = await make_tenant(conn)
    password = "correct horse battery"
    member = await make_member(conn, tenant, email="ada@example.test", password=password)
    async with dashboard_client(services) as client:
        page = await client.get("/app/sign-in")
        form = {"csrf": csrf_of(page.text), "email": "ADA@example.test"}
        bad = await client.post("/app/sign-in", data={**form, "password": "wrong horse"})
        assert bad.status_code == 401
        # An address that is no member's names no one: nothing is recorded for it.
        form["csrf"] = csrf_of(bad.text)
        unknown = await client.post(
            "/app/sign-in", data={**form, "email": "bob@example.test", "password": "x"}
        )
        assert unknown.status_code == 401
        form["csrf"] = csrf_of(unknown.text)
        good = await client.post("/app/sign-in", data={**form, "password": password})
        assert good.status_code == 303, good.text
    async with dashboard_client(services) as client:
        assert (await client.get(await sign_in_link(conn, member))).status_code == 303
    recorded = await rows(
        conn,
        "SELECT actor_kind, actor_id, actor_name, action, subject, via FROM audit_log ORDER BY seq",
    )
    one = {"actor_kind": "member", "actor_id": member, "actor_name": "ada@example.test"}
    assert recorded == [
        {**one, "action": action, "subject": member, "via": "dashboard"}
        for action in ("member.sign_in_failed", "member.signed_in", "member.signed_in")
    ]
    assert password not in repr(await rows(conn, "SELECT * FROM audit_log"))


async def test_opening_a_receipt_is_one_read_not_one_around_each_action(
    services: Services, conn: Conn
) -> None:
    tenant = await make_tenant(conn)
    form = await make_form(conn, tenant)
    receipt = await make_submission(conn, tenant, form, {"name": "Ada"})
    member = await make_member(conn, tenant)
    async with dashboard_client(services) as client:
        assert (await client.get(await sign_in_link(conn, member))).status_code == 303
        page = await client.get(f"/app/submissions/{receipt}")
        csrf = csrf_of(page.text)
        for action in ("spam", "release"):
            done = await client.post(f"/app/submissions/{receipt}/{action}", data={"csrf": csrf})
            assert done.status_code == 303, done.text
            assert (await client.get(done.headers["location"])).status_code == 200
    recorded = await rows(conn, "SELECT action, subject FROM audit_log ORDER BY seq")
    assert [(r["action"], r["subject"]) for r in recorded] == [
        ("member.signed_in", member),
        ("submission.read", receipt),
        ("submission.marked_spam", receipt),
        ("submission.released", receipt),
    ]
