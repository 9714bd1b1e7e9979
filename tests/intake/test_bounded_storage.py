"""Bounded storage on the submit path: honeypot spam keeps no files, spam and quarantined
submissions expire after the spam retention, attachment bytes are capped per month."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

from core.owner.plans import MIB
from core.platform.clock import month_of, utcnow
from core.platform.db import Conn
from core.platform.services import Services
from tests.support.api import assert_problem
from tests.support.builders import setup_form
from tests.support.files import pdf
from tests.support.records import rows
from tests.support.settings import built_services
from tests.support.submit import submit_client

JSON_ACCEPT = {"Accept": "application/json"}
CV_FIELD = {"cv": {"types": [".pdf"], "max_files": 1}}


def _files() -> list[tuple[str, tuple[str, bytes, str]]]:
    return [("cv", ("cv.pdf", pdf(), "application/pdf"))]


def _stored_files(services: Services) -> list[Path]:
    root = Path(services.settings.storage_url.removeprefix("file://"))
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


async def test_submit__honeypot_spam_keeps_its_values_but_writes_no_file(
    services: Services, conn: Conn
) -> None:
    _, form = await setup_form(conn, plan="self_hosted", file_fields=CV_FIELD)
    async with submit_client(services) as client:
        spam = await client.post(
            f"/s/{form}",
            data={"name": "Bot", "_gotcha": "http://spam.example"},
            files=_files(),
            headers=JSON_ACCEPT,
        )
        ham = await client.post(
            f"/s/{form}", data={"name": "Ada"}, files=_files(), headers=JSON_ACCEPT
        )
    # The bot is answered exactly like a person.
    assert spam.status_code == ham.status_code == 201
    assert spam.json().keys() == ham.json().keys()
    [row] = await rows(
        conn,
        'SELECT status, reason, "values" FROM submissions WHERE id = %(id)s',
        id=spam.json()["receipt"],
    )
    assert (row["status"], row["reason"], row["values"]) == ("spam", "honeypot", {"name": "Bot"})
    objects = await rows(conn, "SELECT submission_id FROM stored_objects")
    assert objects == [{"submission_id": ham.json()["receipt"]}]
    attachments = await rows(conn, "SELECT submission_id FROM attachments")
    assert attachments == [{"submission_id": ham.json()["receipt"]}]
    assert len(_stored_files(services)) == 1
    [usage] = await rows(conn, "SELECT attachment_bytes FROM usage_counters WHERE shard = 0")
    assert usage["attachment_bytes"] == len(pdf())


async def test_submit__spam_and_quarantined_get_the_spam_retention_on_every_plan(
    services: Services, conn: Conn
) -> None:
    _, form = await setup_form(conn, plan="self_hosted", allowed_origins=["https://ok.example"])
    _, short = await setup_form(conn, name="Short", plan="free", retention_days=7)
    async with submit_client(services) as client:
        accepted = await client.post(
            f"/s/{form}", data={"n": "1"}, headers={**JSON_ACCEPT, "Origin": "https://ok.example"}
        )
        spam = await client.post(
            f"/s/{form}",
            data={"n": "2", "_gotcha": "x"},
            headers={**JSON_ACCEPT, "Origin": "https://ok.example"},
        )
        quarantined = await client.post(
            f"/s/{form}", data={"n": "3"}, headers={**JSON_ACCEPT, "Origin": "https://evil.example"}
        )
        short_spam = await client.post(
            f"/s/{short}", data={"n": "4", "_gotcha": "x"}, headers=JSON_ACCEPT
        )
    kept = {
        row["id"]: (row["status"], row["kept"])
        for row in await rows(
            conn, "SELECT id, status, erase_at - received_at AS kept FROM submissions"
        )
    }
    assert kept == {
        accepted.json()["receipt"]: ("accepted", None),  # self-hosted: kept until erased
        spam.json()["receipt"]: ("spam", timedelta(days=30)),
        quarantined.json()["receipt"]: ("quarantined", timedelta(days=30)),
        short_spam.json()["receipt"]: ("spam", timedelta(days=7)),  # the form's shorter wins
    }


async def test_submit__attachment_bytes_over_the_plans_month_are_refused_and_nothing_written(
    services: Services, conn: Conn
) -> None:
    tenant, form = await setup_form(conn, plan="free", file_fields=CV_FIELD)
    now = utcnow()
    almost = 100 * MIB - len(pdf()) + 1  # the free plan's month, less than one file
    await conn.execute(
        "INSERT INTO usage_counters (organization_id, month, attachment_bytes)"
        " VALUES (%(org)s, %(month)s, %(bytes)s)",
        {"org": tenant.org, "month": month_of(now), "bytes": almost},
    )
    async with submit_client(services) as client:
        refused = await client.post(
            f"/s/{form}", data={"name": "Ada"}, files=_files(), headers=JSON_ACCEPT
        )
        without_files = await client.post(f"/s/{form}", data={"name": "Bo"}, headers=JSON_ACCEPT)
    body = assert_problem(refused, 402, "plan_limit")
    assert "attachment" in body["detail"]
    assert without_files.status_code == 201
    assert await rows(conn, "SELECT storage_key FROM stored_objects") == []
    assert _stored_files(services) == []
    names = await rows(conn, """SELECT "values" ->> 'name' AS name FROM submissions""")
    assert names == [{"name": "Bo"}]
    [usage] = await rows(conn, "SELECT attachment_bytes FROM usage_counters WHERE shard = 0")
    assert usage["attachment_bytes"] == almost

    await conn.execute(
        "UPDATE usage_counters SET attachment_bytes = %(b)s WHERE shard = 0", {"b": almost - 1}
    )
    async with submit_client(services) as client:
        fits = await client.post(
            f"/s/{form}", data={"name": "Cy"}, files=_files(), headers=JSON_ACCEPT
        )
    assert fits.status_code == 201, fits.text
    [usage] = await rows(conn, "SELECT attachment_bytes FROM usage_counters WHERE shard = 0")
    assert usage["attachment_bytes"] == 100 * MIB


async def test_submit__concurrent_uploads_never_overshoot_the_months_attachment_bytes(
    db_url: str, tmp_path: Path, conn: Conn
) -> None:
    tenant, form = await setup_form(conn, plan="free", file_fields=CV_FIELD)
    room_for_three = 100 * MIB - 3 * len(pdf())
    await conn.execute(
        "INSERT INTO usage_counters (organization_id, month, attachment_bytes)"
        " VALUES (%(org)s, %(month)s, %(bytes)s)",
        {"org": tenant.org, "month": month_of(utcnow()), "bytes": room_for_three},
    )
    async with built_services(db_url, tmp_path, pool_max=8) as services:
        async with submit_client(services) as client:
            answers = await asyncio.gather(
                *(
                    client.post(
                        f"/s/{form}", data={"n": str(i)}, files=_files(), headers=JSON_ACCEPT
                    )
                    for i in range(10)
                )
            )
        stored = _stored_files(services)
    assert sorted(a.status_code for a in answers) == [201] * 3 + [402] * 7
    assert len(stored) == 3
    [usage] = await rows(conn, "SELECT attachment_bytes FROM usage_counters WHERE shard = 0")
    assert usage["attachment_bytes"] == 100 * MIB
