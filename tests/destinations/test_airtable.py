from __future__ import annotations

import json
from datetime import timedelta

from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from core.ticks.digests import run_digests
from tests.support.api import Recorder, api_client, assert_problem
from tests.support.builders import make_tenant
from tests.support.peers import receiver
from tests.support.records import attempts, rows
from tests.support.settings import with_settings
from tests.support.vendors import (
    AIRTABLE_BASE,
    AIRTABLE_TOKEN,
    Airtable,
    deliver,
    post,
    read_destination,
    send_test,
    wire,
)

DESTINATION = {
    "type": "airtable",
    "config": {"base_id": AIRTABLE_BASE, "table": "submissions"},
    "secret": AIRTABLE_TOKEN,
}


async def test_airtable__fields_go_to_the_columns_named_like_them_by_type(
    services: Services, conn: Conn
) -> None:
    double = Airtable()
    with receiver(double.respond) as peer:
        tables = with_settings(services, airtable_url=peer.url)
        wired = await wire(tables, conn, DESTINATION)
        values = {"name": "Ada", "Email": "ada@example.com", "seats": "3", "subscribe": "on"}
        first = await post(tables, wired.form, {**values, "plan": "Pro", "colour": "teal"})
        await deliver(tables)
        # The form changes: `name` and `plan` are gone, `company` is new.
        second = await post(tables, wired.form, {"email": "bob@example.com", "company": "Acme"})
        await deliver(tables)
    assert double.problems == []
    assert double.records == [
        {
            "Receipt": first,
            "Name": "Ada",
            "Email": "ada@example.com",
            "Seats": 3,
            "Subscribe": True,
            "Plan": "Pro",
        },
        {"Receipt": second, "Email": "bob@example.com"},
    ]
    assert double.creates == [1, 1]
    sent = await rows(conn, "SELECT status FROM deliveries")
    assert [row["status"] for row in sent] == ["sent", "sent"]


async def test_airtable__a_select_option_the_owner_did_not_make_is_refused_not_created(
    services: Services, conn: Conn
) -> None:
    double = Airtable()
    with receiver(double.respond) as peer:
        tables = with_settings(services, airtable_url=peer.url)
        wired = await wire(tables, conn, DESTINATION)
        await post(tables, wired.form, {"name": "Ada", "plan": "Enterprise"})
        await deliver(tables)
    assert double.records == []
    [row] = await rows(conn, "SELECT id, status, reason FROM deliveries")
    assert (row["status"], row["reason"]) == ("dead", "http_422")
    [attempt] = await attempts(conn, row["id"])
    assert "INVALID_MULTIPLE_CHOICE_OPTIONS" in json.dumps(attempt, default=str)


async def test_airtable__a_digest_creates_its_records_in_batches_of_ten(
    services: Services, conn: Conn
) -> None:
    double = Airtable()
    with receiver(double.respond) as peer:
        tables = with_settings(services, airtable_url=peer.url)
        wired = await wire(
            tables,
            conn,
            DESTINATION,
            route={"mode": "digest", "period": "daily"},
            form={"rate_limit": {"max": 100, "per_seconds": 600}},
        )
        receipts = [await post(tables, wired.form, {"name": f"N{n}"}) for n in range(23)]
        closed = utcnow() + timedelta(days=1, hours=1)
        await run_digests(tables, now=closed, budget=10)
        await deliver(tables, now=closed)
    assert double.creates == [10, 10, 3]
    assert [record["Receipt"] for record in double.records] == receipts
    [row] = await rows(conn, "SELECT status FROM deliveries WHERE kind = 'digest'")
    assert row["status"] == "sent"


async def test_airtable__a_429_holds_the_destination_for_30_seconds(
    services: Services, conn: Conn
) -> None:
    double = Airtable(fail=[(429, {}, b'{"errors": [{"error": "RATE_LIMIT_REACHED"}]}')])
    with receiver(double.respond) as peer:
        tables = with_settings(services, airtable_url=peer.url)
        wired = await wire(tables, conn, DESTINATION)
        await post(tables, wired.form, {"name": "Ada"})
        before = utcnow()
        await deliver(tables)
    [row] = await rows(conn, "SELECT status, last_detail FROM deliveries")
    assert row == {"status": "failed", "last_detail": "http_429"}
    [held] = await rows(
        conn, "SELECT rate_next_at FROM destinations WHERE id = %(id)s", id=wired.destination
    )
    assert 30 <= (held["rate_next_at"] - before).total_seconds() <= 35


async def test_airtable__a_revoked_token_ends_deliveries_and_the_health_says_failing(
    services: Services, conn: Conn
) -> None:
    double = Airtable(revoked=True)
    with receiver(double.respond) as peer:
        tables = with_settings(services, airtable_url=peer.url)
        wired = await wire(tables, conn, {**DESTINATION, "rate_limit": {"per_second": 100}})
        for n in range(5):
            await post(tables, wired.form, {"name": f"N{n}"})
        await deliver(tables)
        found = await read_destination(tables, wired)
    ended = await rows(conn, "SELECT status, reason FROM deliveries")
    assert ended == [{"status": "dead", "reason": "credentials_rejected"}] * 5
    assert found["health"] == "failing"


async def test_airtable__the_test_send_creates_a_record_and_the_token_is_write_only(
    services: Services, conn: Conn
) -> None:
    double = Airtable()
    recorder = Recorder()
    with receiver(double.respond) as peer:
        tables = with_settings(services, airtable_url=peer.url)
        wired = await wire(tables, conn, DESTINATION)
        answer = await send_test(tables, wired)
        async with api_client(tables, recorder=recorder) as client:
            shown = await client.get(
                f"/v1/destinations/{wired.destination}", headers=wired.tenant.headers
            )
    assert answer["ok"] is True
    assert double.records == [{"Receipt": "sub_test", "Email": "visitor@example.com"}]
    assert shown.json()["config"] == DESTINATION["config"]
    assert shown.json()["secret_set"] is True
    assert AIRTABLE_TOKEN not in recorder.text()


async def test_airtable__a_bad_base_or_token_is_refused(services: Services, conn: Conn) -> None:
    acme = await make_tenant(conn)
    async with api_client(services) as client:
        bad_base = {**DESTINATION, "name": "T", "config": {"base_id": "app/../x", "table": "T"}}
        refused = await client.post("/v1/destinations", json=bad_base, headers=acme.headers)
        assert_problem(refused, 422, "invalid_config")
        bad_token = {**DESTINATION, "name": "T", "secret": "keyOldStyleApiKey"}
        refused = await client.post("/v1/destinations", json=bad_token, headers=acme.headers)
        assert_problem(refused, 422, "invalid_secret")
    assert await rows(conn, "SELECT 1 FROM destinations") == []


async def test_airtable__a_send_made_again_after_a_lost_answer_updates_its_record(
    services: Services, conn: Conn
) -> None:
    double = Airtable(lose_answers=1)
    with receiver(double.respond) as peer:
        tables = with_settings(services, airtable_url=peer.url)
        wired = await wire(tables, conn, DESTINATION)
        receipt = await post(tables, wired.form, {"name": "Ada"})
        await deliver(tables)
        [lost] = await rows(conn, "SELECT status, last_detail FROM deliveries")
        await conn.execute("UPDATE deliveries SET next_attempt_at = now()")
        await deliver(tables)
    assert lost == {"status": "failed", "last_detail": "http_503"}
    assert double.records == [{"Receipt": receipt, "Name": "Ada"}]
    upserts = [json.loads(r.body) for r in peer.requests if r.method == "PATCH"]
    assert [u["performUpsert"] for u in upserts] == [{"fieldsToMergeOn": ["Receipt"]}] * 2
    [row] = await rows(conn, "SELECT status FROM deliveries")
    assert row["status"] == "sent"
