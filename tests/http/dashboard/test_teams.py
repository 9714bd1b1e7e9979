"""The dashboard acts with its member's role: a viewer's pages hold no submission value, what
reads or changes values is refused; what an operator reads and an admin changes lands in the audit
trail, which the audit page lists, filters and downloads as CSV."""

from __future__ import annotations

import csv
import io

from core.platform.db import Conn
from core.platform.services import Services
from tests.support.builders import make_form, make_submission, make_tenant
from tests.support.dashboard import dashboard_client, sign_in
from tests.support.records import rows

SECRET_VALUE = "Grace-visitor-4412"


async def test_a_viewer_sees_states_but_never_a_value_and_changes_nothing(
    services: Services, conn: Conn
) -> None:
    tenant = await make_tenant(conn)
    form = await make_form(conn, tenant)
    receipt = await make_submission(conn, tenant, form, {"name": SECRET_VALUE})
    async with dashboard_client(services) as client:
        csrf = await sign_in(client, tenant.key, role="viewer")
        for path in ("/app", f"/app/submissions/{receipt}", "/app/destinations"):
            shown = await client.get(path)
            assert shown.status_code == 200, path
            assert SECRET_VALUE not in shown.text, path
        assert receipt in (await client.get("/app")).text
        for path in (
            f"/app/export.csv?form={form}",
            "/app/audit",
            "/app?q=Grace",
        ):
            page = await client.get(path)
            assert page.status_code == 403, path
            assert SECRET_VALUE not in page.text
            assert "needs the" in page.text
        erased = await client.post(f"/app/submissions/{receipt}/erase", data={"csrf": csrf})
        assert erased.status_code == 403
    [row] = await rows(conn, "SELECT values FROM submissions")
    assert row["values"] == {"name": SECRET_VALUE}
    # Only the sign-in: nothing read, nothing changed.
    assert await rows(conn, "SELECT action FROM audit_log") == [{"action": "member.signed_in"}]


async def test_what_the_dashboard_reads_and_changes_is_audited_and_listed_as_csv(
    services: Services, conn: Conn
) -> None:
    tenant = await make_tenant(conn)
    form = await make_form(conn, tenant)
    receipt = await make_submission(conn, tenant, form, {"name": SECRET_VALUE})
    async with dashboard_client(services) as client:
        await sign_in(client, tenant.key, role="operator")
        page = await client.get(f"/app/submissions/{receipt}")
        assert page.status_code == 200 and SECRET_VALUE in page.text
    async with dashboard_client(services) as client:
        csrf = await sign_in(client, tenant.key)
        made = await client.post("/app/forms", data={"csrf": csrf, "name": "Survey"})
        assert made.status_code == 303, made.text
        new_form = made.headers["location"].rsplit("/", 1)[1]
        listed = await client.get("/app/audit")
        assert listed.status_code == 200
        shown = ("<code>submission.read</code>", "<code>form.created</code>")
        assert all(action in listed.text for action in shown)
        only = await client.get("/app/audit", params={"action": "form.created"})
        assert shown[1] in only.text and shown[0] not in only.text
        download = await client.get("/app/audit.csv")
        assert download.status_code == 200
        assert download.headers["content-type"].startswith("text/csv")
    table = list(csv.DictReader(io.StringIO(download.text)))
    actions = [(r["action"], r["subject"], r["via"], r["actor_kind"]) for r in table]
    signed_in = [r for r in actions if r[0] == "member.signed_in"]
    assert [r for r in actions if r[0] != "member.signed_in"] == [
        ("form.created", new_form, "dashboard", "member"),
        ("submission.read", receipt, "dashboard", "member"),
    ]
    assert len(signed_in) == 2
    named = [r["actor_name"].split("-")[0] for r in table if r["action"] != "member.signed_in"]
    assert named == ["owner", "operator"]
    assert SECRET_VALUE not in download.text
