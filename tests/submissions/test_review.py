"""Release from quarantine and marking as spam, through /v1 and the receipt page."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

from core.outbox.worker import Deliverer
from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from tests.support.api import api_client, assert_problem
from tests.support.builders import (
    make_form,
    make_route_to,
    make_submission,
    make_tenant,
    setup_form,
)
from tests.support.dashboard import dashboard_client, sign_in
from tests.support.peers import receiver
from tests.support.records import rows
from tests.support.submit import submit_client

SITE = "https://shop.example"


async def _quarantined(services: Services, form: str) -> str:
    """A submission quarantined because its origin is not on the form's allowlist."""
    async with submit_client(services) as client:
        response = await client.post(
            f"/s/{form}",
            json={"zeta": "z", "alpha": "a"},
            headers={"Origin": "https://elsewhere.example"},
        )
    assert response.status_code == 201, response.text
    return str(response.json()["receipt"])


async def _deliveries(conn: Conn, submission: str) -> list[dict[str, object]]:
    return await rows(
        conn,
        "SELECT id, route_id, status, reason, payload, template FROM deliveries"
        " WHERE submission_id = %(id)s ORDER BY id",
        id=submission,
    )


async def test_release__a_quarantined_submission_is_delivered_once(
    services: Services, conn: Conn
) -> None:
    tenant = await make_tenant(conn, plan="self_hosted")
    form = await make_form(
        conn, tenant, allowed_origins=[SITE], labels={"alpha": "Alpha", "zeta": "Zeta"}
    )
    with receiver() as peer:
        _, live = await make_route_to(conn, tenant, form, config={"url": peer.url + "/hook"})
        # A route that opted into quarantined submissions already has its delivery.
        quarantine_dst, _ = await make_route_to(conn, tenant, form, config={"url": peer.url})
        await conn.execute(
            "UPDATE routes SET include_statuses = '{accepted,quarantined}'"
            " WHERE destination_id = %(dst)s",
            {"dst": quarantine_dst},
        )
        receipt = await _quarantined(services, form)
        before = await _deliveries(conn, receipt)
        async with api_client(services, tenant.key) as api:
            released = await api.post(f"/v1/submissions/{receipt}/release")
            again = await api.post(f"/v1/submissions/{receipt}/release")
            events = (await api.get("/v1/events")).json()["data"]
        await Deliverer(services).run_pass(now=utcnow(), budget=30)
    assert len(before) == 1
    assert released.status_code == 200, released.text
    body = released.json()
    assert (body["status"], body["reason"]) == ("accepted", None)
    assert body["released_at"] is not None
    history = [
        (h["type"], h["data"].get("reason"), h["data"].get("from_reason")) for h in body["history"]
    ]
    assert history == [
        ("submission.quarantined", "origin_rejected", None),
        ("submission.released", None, "origin_rejected"),
    ]
    assert body["history"][1]["data"]["from_status"] == "quarantined"
    assert_problem(again, 409, "already_released")
    after = await _deliveries(conn, receipt)
    assert len(after) == 2
    [new] = [d for d in after if d["route_id"] == live]
    # No copy of the values: the body is built from the submission when it is sent.
    assert new["payload"] is None and new["template"] == {"subject": None, "text": None}
    assert [e["type"] for e in events].count("submission.released") == 1
    # The receiver gets the release like any accepted submission, in the visitor's order.
    [hooked] = [r for r in peer.requests if r.path == "/hook"]
    sent = json.loads(hooked.body)
    assert list(sent["values"]) == ["zeta", "alpha"] and sent["receipt"] == receipt
    assert sent["labels"] == {"zeta": "Zeta", "alpha": "Alpha"}


async def test_release__two_at_once_plan_the_deliveries_once(
    services: Services, conn: Conn
) -> None:
    tenant, form = await setup_form(conn, routes=2, allowed_origins=[SITE])
    receipt = await _quarantined(services, form)
    async with api_client(services, tenant.key) as api:
        answers = await asyncio.gather(
            *(api.post(f"/v1/submissions/{receipt}/release") for _ in range(4))
        )
    assert sorted(a.status_code for a in answers) == [200, 409, 409, 409]
    assert len(await _deliveries(conn, receipt)) == 2
    released = await rows(
        conn,
        "SELECT id FROM events WHERE type = 'submission.released' AND subject_id = %(id)s",
        id=receipt,
    )
    assert len(released) == 1


async def test_release__refused_for_accepted_erased_expired_and_other_organizations(
    services: Services, conn: Conn
) -> None:
    tenant, form = await setup_form(conn)
    other, _ = await setup_form(conn, name="Other")
    accepted = await make_submission(conn, tenant, form, {"a": 1})
    erased = await make_submission(
        conn, tenant, form, None, status="quarantined", reason="rate_limited", erased_at=utcnow()
    )
    expired = await make_submission(
        conn,
        tenant,
        form,
        {"a": 1},
        status="quarantined",
        reason="rate_limited",
        received_at=utcnow() - timedelta(days=2),
        erase_at=utcnow() - timedelta(days=1),
    )
    async with api_client(services, tenant.key) as api:
        assert_problem(
            await api.post(f"/v1/submissions/{accepted}/release"), 409, "already_released"
        )
        for path in ("release", "spam"):
            assert_problem(await api.post(f"/v1/submissions/{erased}/{path}"), 409, "values_erased")
            assert_problem(
                await api.post(f"/v1/submissions/{expired}/{path}"), 409, "values_expired"
            )
    async with api_client(services, other.key) as api:
        assert_problem(await api.post(f"/v1/submissions/{expired}/release"), 404, "not_found")
        assert_problem(await api.post(f"/v1/submissions/{accepted}/spam"), 404, "not_found")
    states = await rows(conn, "SELECT status FROM submissions ORDER BY id")
    assert sorted(s["status"] for s in states) == ["accepted", "quarantined", "quarantined"]
    assert await rows(conn, "SELECT id FROM deliveries") == []


async def test_spam__skips_unsent_deliveries_and_a_release_queues_them_again(
    services: Services, conn: Conn
) -> None:
    tenant, form = await setup_form(conn, routes=2)
    async with submit_client(services) as client:
        posted = await client.post(f"/s/{form}", json={"a": "1"})
    receipt = posted.json()["receipt"]
    sent = (await _deliveries(conn, receipt))[0]["id"]
    await conn.execute("UPDATE deliveries SET status = 'sent' WHERE id = %(id)s", {"id": sent})
    async with api_client(services, tenant.key) as api:
        marked = await api.post(f"/v1/submissions/{receipt}/spam")
        skipped = await _deliveries(conn, receipt)
        twice = await api.post(f"/v1/submissions/{receipt}/spam")
        released = await api.post(f"/v1/submissions/{receipt}/release")
    assert marked.status_code == 200
    assert (marked.json()["status"], marked.json()["reason"]) == ("spam", "marked_spam")
    assert [(d["status"], d["reason"]) for d in skipped] == [
        ("sent", None),
        ("skipped", "submission_spam"),
    ]
    assert twice.status_code == 200
    assert [h["type"] for h in twice.json()["history"]] == [
        "submission.received",
        "submission.marked_spam",
    ]
    assert twice.json()["history"][1]["data"]["from_status"] == "accepted"
    assert released.status_code == 200
    assert [d["status"] for d in await _deliveries(conn, receipt)] == ["sent", "pending"]


async def test_review__a_new_status_takes_its_retention_from_arrival(
    services: Services, conn: Conn
) -> None:
    """Released, a quarantined submission keeps its values as long as an accepted one (on
    `self_hosted`, for good); marked as spam, it gets the spam retention."""
    tenant = await make_tenant(conn, plan="self_hosted")
    form = await make_form(conn, tenant, allowed_origins=[SITE])
    quarantined = await _quarantined(services, form)
    async with submit_client(services) as client:
        accepted = await client.post(f"/s/{form}", json={"a": "1"}, headers={"Origin": SITE})
    spam = accepted.json()["receipt"]

    async def erase_at(submission: str) -> object:
        [row] = await rows(
            conn,
            "SELECT erase_at - received_at AS kept FROM submissions WHERE id = %(id)s",
            id=submission,
        )
        return row["kept"]

    assert (await erase_at(quarantined), await erase_at(spam)) == (timedelta(days=30), None)
    async with api_client(services, tenant.key) as api:
        assert (await api.post(f"/v1/submissions/{quarantined}/release")).status_code == 200
        assert (await api.post(f"/v1/submissions/{spam}/spam")).status_code == 200
    assert (await erase_at(quarantined), await erase_at(spam)) == (None, timedelta(days=30))


async def test_receipt_page__deliver_anyway_and_mark_as_spam_buttons(
    services: Services, conn: Conn
) -> None:
    tenant, form = await setup_form(conn, allowed_origins=[SITE])
    receipt = await _quarantined(services, form)
    other = await make_tenant(conn, name="Other")
    async with dashboard_client(services) as client:
        token = await sign_in(client, other.key)
        foreign = await client.post(f"/app/submissions/{receipt}/release", data={"csrf": token})
    async with dashboard_client(services) as client:
        token = await sign_in(client, tenant.key)
        page = (await client.get(f"/app/submissions/{receipt}")).text
        no_csrf = await client.post(f"/app/submissions/{receipt}/release", data={})
        released = await client.post(f"/app/submissions/{receipt}/release", data={"csrf": token})
        after = (await client.get(f"/app/submissions/{receipt}")).text
        again = await client.post(f"/app/submissions/{receipt}/release", data={"csrf": token})
        spam = await client.post(f"/app/submissions/{receipt}/spam", data={"csrf": token})
        marked = (await client.get(f"/app/submissions/{receipt}")).text
    assert foreign.status_code == 404
    assert ">Deliver anyway</button>" in page and ">Mark as spam</button>" in page
    assert no_csrf.status_code == 403
    assert released.status_code == 303
    assert ">Deliver anyway</button>" not in after
    assert "Released (was quarantined · origin rejected): 1 deliveries planned" in after
    assert "Quarantined · origin rejected" in after
    assert again.status_code == 409 and "already released" in again.text
    assert spam.status_code == 303
    assert "Marked as spam (was accepted)" in marked and ">Mark as spam</button>" not in marked
    [delivery] = await _deliveries(conn, receipt)
    assert (delivery["status"], delivery["reason"]) == ("skipped", "submission_spam")
