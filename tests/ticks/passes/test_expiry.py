"""The expiry pass erases the submissions past `erase_at`, in batches, each row once
whatever the passes racing; values are unreadable from `erase_at` on, before it runs."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from core.ticks.maintenance import RetentionOptions
from core.ticks.retention import run_retention
from tests.support.api import api_client
from tests.support.builders import make_form, make_tenant, setup_form
from tests.support.files import object_exists, pdf
from tests.support.records import rows
from tests.support.settings import built_services
from tests.support.submit import submit_client

JSON_ACCEPT = {"Accept": "application/json"}


async def test_retention__values_gone_at_once_then_cleaned_and_the_receipt_kept(
    db_url: str,
    tmp_path: Path,
    conn: Conn,
    storage_url: str,
) -> None:
    tenant, form = await setup_form(conn, file_fields={"cv": {"types": [".pdf"], "max_files": 1}})
    async with built_services(db_url, tmp_path, storage_url=storage_url) as services:
        async with submit_client(services) as client:
            first = await client.post(
                f"/s/{form}",
                data={"name": "Ada", "_idempotency_key": "k-1"},
                files=[("cv", ("cv.pdf", pdf(), "application/pdf"))],
                headers=JSON_ACCEPT,
            )
            assert first.status_code == 201, first.text
            receipt = first.json()["receipt"]
            [attachment] = await rows(conn, "SELECT id, storage_key FROM attachments")
            storage_key = str(attachment["storage_key"])
            assert object_exists(storage_url, storage_key)
            now = utcnow()
            await conn.execute(
                "UPDATE submissions SET received_at = %(at)s, erase_at = %(erase_at)s",
                {"at": now - timedelta(days=91), "erase_at": now - timedelta(days=1)},
            )
            # Past erase_at, before any cleanup: values and files are unreadable already.
            async with api_client(services, tenant.key) as api:
                detail = (await api.get(f"/v1/submissions/{receipt}")).json()
                assert detail["values"] is None and detail["values_state"] == "expired"
                assert detail["attachments"] == []
                download = await api.get(
                    f"/v1/submissions/{receipt}/attachments/{attachment['id']}"
                )
                assert download.status_code == 409
                assert download.json()["code"] == "values_expired"
            [raw] = await rows(conn, 'SELECT "values" FROM submissions')
            assert raw["values"] == {"name": "Ada"}  # still stored until the tick

            stats = await run_retention(services, now=now, budget=10)
            assert (stats["expired"], stats["files_deleted"], stats["deliveries_skipped"]) == (
                1,
                1,
                1,
            )
            [row] = await rows(
                conn, 'SELECT id, "values", erased_at, erase_reason, meta FROM submissions'
            )
            assert row["id"] == receipt and row["values"] is None
            assert row["erase_reason"] == "expired" and row["erased_at"] == now
            assert not object_exists(storage_url, storage_key)
            assert await rows(conn, "SELECT id FROM attachments") == []
            [obj] = await rows(conn, "SELECT deleted_at FROM stored_objects")
            assert obj["deleted_at"] == now
            [dlv] = await rows(conn, "SELECT status, reason, payload::text FROM deliveries")
            assert (dlv["status"], dlv["reason"]) == ("skipped", "values_expired")
            assert dlv["payload"] is None  # the body was only ever built from the row
            events = await rows(conn, "SELECT data FROM events WHERE type = 'submission.erased'")
            assert events == [{"data": {"reason": "expired", "files": 1}}]

            repeat = await client.post(
                f"/s/{form}",
                data={"name": "Ada", "_idempotency_key": "k-1"},
                files=[("cv", ("cv.pdf", pdf(), "application/pdf"))],
                headers=JSON_ACCEPT,
            )
            assert repeat.status_code == 200, repeat.text
            assert repeat.json()["receipt"] == receipt and repeat.json()["duplicate"] is True
        again = await run_retention(services, now=now, budget=10)
        assert again.get("expired", 0) == 0 and again.get("files_deleted", 0) == 0


async def _expired_rows(conn: Conn, count: int) -> tuple[str, str]:
    tenant = await make_tenant(conn, plan="self_hosted")
    form = await make_form(conn, tenant)
    now = utcnow()
    await conn.execute(
        'INSERT INTO submissions (id, organization_id, form_id, status, "values", payload_hash,'
        " received_at, erase_at)"
        " SELECT 'sub_' || lpad(i::text, 26, '0'), %(org)s, %(form)s, 'accepted',"
        " jsonb_build_object('n', i), '\\x00', %(at)s, %(erase_at)s"
        " FROM generate_series(1, %(count)s) i",
        {
            "org": tenant.org,
            "form": form,
            "count": count,
            "at": now - timedelta(days=2),
            "erase_at": now - timedelta(days=1),
        },
    )
    return tenant.org, form


async def test_retention__expiry_runs_in_batches(services: Services, conn: Conn) -> None:
    await _expired_rows(conn, 1_250)
    stats = await run_retention(
        services, now=utcnow(), budget=30, options=RetentionOptions(batch=500)
    )
    assert (stats["expired"], stats["expiry_batches"], stats["largest_batch"]) == (1_250, 3, 500)
    left = await rows(conn, 'SELECT count(*) AS n FROM submissions WHERE "values" IS NOT NULL')
    assert left == [{"n": 0}]


@pytest.mark.slow
async def test_retention__a_hundred_thousand_expired_rows_in_batches_of_500(
    services: Services, conn: Conn
) -> None:
    await _expired_rows(conn, 100_000)
    stats = await run_retention(services, now=utcnow(), budget=600)
    assert stats["batch_size"] == 500
    assert (stats["expired"], stats["expiry_batches"], stats["largest_batch"]) == (
        100_000,
        200,
        500,
    )
    events = await rows(conn, "SELECT count(*) AS n FROM events WHERE type = 'submission.erased'")
    assert events == [{"n": 100_000}]


async def test_retention__concurrent_passes_erase_each_row_once(
    services: Services, conn: Conn
) -> None:
    import asyncio

    await _expired_rows(conn, 1_250)
    now = utcnow()
    results = await asyncio.gather(
        *(
            run_retention(services, now=now, budget=30, options=RetentionOptions(batch=200))
            for _ in range(2)
        )
    )
    assert sum(r.get("expired", 0) for r in results) == 1_250
    events = await rows(conn, "SELECT count(*) AS n FROM events WHERE type = 'submission.erased'")
    assert events == [{"n": 1_250}]
