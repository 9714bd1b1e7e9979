"""Submissions in weekly partitions (migrations 0066 and 0067, docs/scale.md): the retention
tick makes weeks ahead and drops a week once every row in it is erased and past its erase
time (after what references its rows, the stored files deleted as by expiry); a week holding
a kept row stays. Idempotency keys hold across weeks, the owner's erase reaches every week, and an
installation's rows stay readable after the upgrade while posts land."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import httpx
import pytest

from core.destinations.registry import DESTINATION_TYPES
from core.http.submit_app import create_submit_app
from core.platform.clock import utcnow
from core.platform.db import Conn, connect
from core.platform.ids import new_id
from core.platform.migrate import migrate
from core.platform.services import Services
from core.ticks.passes.history import WEEKS_AHEAD, week_start
from core.ticks.retention import run_retention
from tests.support.api import api_client
from tests.support.builders import make_submission, setup_form
from tests.support.files import object_exists, pdf
from tests.support.migrations import EarlierRelease
from tests.support.records import rows
from tests.support.settings import built_services
from tests.support.submit import submit_client

JSON_ACCEPT = {"Accept": "application/json"}


async def _partition_of(conn: Conn, submission: str) -> str | None:
    found = await rows(
        conn,
        "SELECT tableoid::regclass::text AS part FROM submissions WHERE id = %(id)s",
        id=submission,
    )
    return found[0]["part"] if found else None


def _id_in_week(week: datetime) -> str:
    """A submission id made an hour into the week starting at `week`."""
    return new_id("sub", now_ms=int((week + timedelta(hours=1)).timestamp() * 1000))


async def _first_week(conn: Conn) -> datetime:
    [first] = await rows(
        conn,
        "SELECT min(range_start) AS range_start FROM history_partitions"
        " WHERE parent = 'submissions' AND range_start > '-infinity'",
    )
    return first["range_start"]  # type: ignore[no-any-return]


async def test_weeks__made_ahead_and_a_week_of_erased_rows_dropped_with_its_files(
    db_url: str, tmp_path: Path, conn: Conn, storage_url: str
) -> None:
    tenant, form = await setup_form(conn, file_fields={"cv": {"types": [".pdf"], "max_files": 1}})
    first = await _first_week(conn)
    # A row the owner keeps (no erase time) in the first dated week: that week stays.
    kept = await make_submission(conn, tenant, form, {"n": 1}, id=_id_in_week(first))
    async with built_services(db_url, tmp_path, storage_url=storage_url) as services:
        async with submit_client(services) as client:
            posted = await client.post(
                f"/s/{form}",
                data={"name": "Ada"},
                files=[("cv", ("cv.pdf", pdf(), "application/pdf"))],
                headers=JSON_ACCEPT,
            )
        assert posted.status_code == 201, posted.text
        receipt = posted.json()["receipt"]
        # Posted before the first dated week: the legacy partition holds it.
        assert await _partition_of(conn, receipt) == "submissions_legacy"
        [stored] = await rows(conn, "SELECT storage_key FROM attachments")
        assert object_exists(storage_url, str(stored["storage_key"]))
        assert len(await rows(conn, "SELECT id FROM deliveries")) == 1
        await conn.execute(
            "UPDATE submissions SET erase_at = received_at + interval '1 day' WHERE id = %(id)s",
            {"id": receipt},
        )

        # Three weeks on: the post expired, the legacy partition and the empty second week
        # ended; the first week holds the kept row.
        now = first + timedelta(weeks=2, days=3)
        stats = await run_retention(services, now=now, budget=20)

        assert (stats["expired"], stats["files_deleted"]) == (1, 1)
        assert stats["submission_weeks_dropped"] == 2
        assert not object_exists(storage_url, str(stored["storage_key"]))
        gone = await rows(
            conn,
            "SELECT to_regclass('submissions_legacy') AS legacy, to_regclass(%(second)s) AS second",
            second=f"submissions_{(first + timedelta(weeks=1)).strftime('%Y%m%d')}",
        )
        assert gone == [{"legacy": None, "second": None}]
        assert await _partition_of(conn, receipt) is None
        assert await rows(conn, "SELECT id FROM deliveries") == []
        assert await _partition_of(conn, kept) == f"submissions_{first.strftime('%Y%m%d')}"
        # The current week and WEEKS_AHEAD after it are there.
        ahead = week_start(now) + timedelta(weeks=WEEKS_AHEAD)
        assert await rows(
            conn,
            "SELECT name FROM history_partitions WHERE parent = 'submissions'"
            " AND range_start = %(at)s",
            at=ahead,
        ) == [{"name": f"submissions_{ahead.strftime('%Y%m%d')}"}]

        # Erased, then past its erase time, the kept row's week goes too.
        await conn.execute(
            'UPDATE submissions SET "values" = NULL, erased_at = %(at)s, erase_at = %(at)s'
            " WHERE id = %(id)s",
            {"id": kept, "at": now},
        )
        stats = await run_retention(services, now=now + timedelta(minutes=1), budget=20)
        assert stats["submission_weeks_dropped"] == 1
        assert await _partition_of(conn, kept) is None


async def _search_targets(conn: Conn) -> dict[str, int]:
    """Each submissions partition's trigram index, with its expression's statistics target."""
    found = await rows(
        conn,
        "SELECT t.relname AS part, a.attstattarget AS target"
        "  FROM pg_inherits i"
        "  JOIN pg_index x ON x.indexrelid = i.inhrelid"
        "  JOIN pg_class t ON t.oid = x.indrelid"
        "  JOIN pg_attribute a ON a.attrelid = i.inhrelid AND a.attnum = 1"
        " WHERE i.inhparent = 'submissions_values_trigram_idx'::regclass",
    )
    return {row["part"]: row["target"] for row in found}


async def _weeks(conn: Conn) -> set[str]:
    found = await rows(conn, "SELECT name FROM history_partitions WHERE parent = 'submissions'")
    return {row["name"] for row in found}


async def test_search_statistics__every_week_samples_the_trigram_expression_widely(
    services: Services, conn: Conn
) -> None:
    # Each week's trigram index keeps search's plan steady (migrations/0068): the weeks the
    # upgrade made, and a week the retention tick makes later.
    [index] = await rows(
        conn,
        "SELECT to_regclass('submissions_values_trigram_idx') IS NOT NULL AS made,"
        " EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm') AS possible",
    )
    assert index["made"] == index["possible"]
    if not index["made"]:
        pytest.skip("this PostgreSQL has no pg_trgm (the embedded one): no trigram index")
    before = await _search_targets(conn)
    assert before.keys() == await _weeks(conn) | {"submissions_default"}
    assert set(before.values()) == {1000}

    later = week_start(await _first_week(conn)) + timedelta(weeks=WEEKS_AHEAD + 2)
    await run_retention(services, now=later, budget=20)
    after = await _search_targets(conn)
    made = f"submissions_{(later + timedelta(weeks=WEEKS_AHEAD)).strftime('%Y%m%d')}"
    assert made in after.keys() - before.keys()
    assert after.keys() == await _weeks(conn) | {"submissions_default"}
    assert set(after.values()) == {1000}


async def test_keys__a_repeat_across_a_week_boundary_answers_the_first_receipt(
    services: Services, conn: Conn
) -> None:
    tenant, form = await setup_form(conn, routes=2)
    async with submit_client(services) as client:
        first = await client.post(
            f"/s/{form}", data={"n": "1", "_idempotency_key": "k-1"}, headers=JSON_ACCEPT
        )
        assert first.status_code == 201, first.text
        [made] = await rows(conn, "SELECT payload_hash FROM submissions")
        # The same post with another key, stored in a later week (as if it arrived then).
        later = _id_in_week(await _first_week(conn))
        await make_submission(
            conn,
            tenant,
            form,
            {"n": "1"},
            id=later,
            idempotency_key="k-2",
            payload_hash=made["payload_hash"],
        )
        await conn.execute(
            "INSERT INTO submission_keys (form_id, idempotency_key, organization_id,"
            " submission_id) VALUES (%(f)s, 'k-2', %(o)s, %(s)s)",
            {"f": form, "o": tenant.org, "s": later},
        )
        repeats = [
            await client.post(
                f"/s/{form}",
                data={"n": "1", "_idempotency_key": key},
                headers=JSON_ACCEPT,
            )
            for key in ("k-1", "k-2")
        ]
    receipt = first.json()["receipt"]
    assert [r.json()["receipt"] for r in repeats] == [receipt, later]
    assert await _partition_of(conn, receipt) != await _partition_of(conn, later)
    # One submission each, and one delivery per route of the posted one.
    assert len(await rows(conn, "SELECT id FROM submissions")) == 2
    counted = await rows(
        conn,
        "SELECT route_id, count(*) AS n FROM deliveries WHERE submission_id = %(s)s"
        " GROUP BY route_id",
        s=receipt,
    )
    assert sorted(c["n"] for c in counted) == [1, 1]


async def test_rate_limit__counts_a_clients_posts_in_the_week_before(
    services: Services, conn: Conn
) -> None:
    # The gate reads only the weeks its window can reach (migrations/0069): a client's posts
    # stored in the week before still count after the week turns.
    _, form = await setup_form(conn, rate_limit_max=2)
    turned = await _first_week(conn) + timedelta(minutes=3)
    app = create_submit_app(services)
    app.state.clock = lambda: turned
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app, client=("198.51.100.7", 4000)),
        base_url="http://t",
    ) as client:
        for n in (1, 2):
            earlier = await client.post(f"/s/{form}", json={"n": n}, headers=JSON_ACCEPT)
            assert earlier.status_code == 201, earlier.text
        # Both arrived five minutes ago, before the week turned; their ids (made now, by
        # the real clock) are in the partition before the first week.
        await conn.execute(
            "UPDATE submissions SET received_at = %(at)s", {"at": turned - timedelta(minutes=5)}
        )
        third = await client.post(f"/s/{form}", json={"n": 3}, headers=JSON_ACCEPT)
    assert third.status_code == 201, third.text
    found = await rows(
        conn,
        "SELECT tableoid::regclass::text AS part, status, reason FROM submissions"
        " ORDER BY received_at, id",
    )
    assert [(r["part"], r["status"], r["reason"]) for r in found] == [
        ("submissions_legacy", "accepted", None),
        ("submissions_legacy", "accepted", None),
        ("submissions_legacy", "quarantined", "rate_limited"),
    ]


async def test_erasure__reaches_a_submission_in_every_week(services: Services, conn: Conn) -> None:
    tenant, form = await setup_form(conn)
    async with submit_client(services) as client:
        posted = await client.post(f"/s/{form}", data={"n": "1"}, headers=JSON_ACCEPT)
    receipts = [
        posted.json()["receipt"],
        await make_submission(
            conn, tenant, form, {"n": 2}, id=_id_in_week(await _first_week(conn))
        ),
    ]
    assert len({await _partition_of(conn, r) for r in receipts}) == 2
    async with api_client(services, tenant.key) as api:
        for receipt in receipts:
            assert (await api.post(f"/v1/submissions/{receipt}/erase")).status_code == 200
            detail = (await api.get(f"/v1/submissions/{receipt}")).json()
            assert detail["values"] is None
    left = await rows(conn, 'SELECT "values", erase_reason FROM submissions')
    assert left == [{"values": None, "erase_reason": "requested"}] * 2


async def test_inbox__pages_read_recent_weeks_first_and_keep_the_newest_first_order(
    services: Services, conn: Conn
) -> None:
    # A page is read first from the weeks of ids made in the 15 days before it starts,
    # and kept only when it fills with submissions received since 7 days before it.
    tenant, form = await setup_form(conn)
    now = utcnow()

    def made(at: datetime) -> str:
        return new_id("sub", now_ms=int(at.timestamp() * 1000))

    async def stored(id_at: datetime, received_at: datetime) -> str:
        return await make_submission(
            conn, tenant, form, {"n": 1}, id=made(id_at), received_at=received_at
        )

    # Received in the last hour: the first page, read from the recent weeks alone.
    recent = [
        await stored(now - timedelta(minutes=n), now - timedelta(minutes=n)) for n in range(30)
    ]
    # Ids made 20 days ago, received 13 days ago (an id is at most 8 days older than its
    # arrival): outside the recent weeks, yet newer than what follows.
    skewed = [
        await stored(now - timedelta(days=20, minutes=n), now - timedelta(days=13, minutes=n))
        for n in range(5)
    ]
    # Ids made now for submissions received 30 days ago: inside the recent weeks, so a page
    # read from those alone fills up with them; it must not be kept.
    late = [
        await stored(now + timedelta(seconds=n), now - timedelta(days=30, minutes=n))
        for n in range(25)
    ]
    old = [
        await stored(now - timedelta(days=60, minutes=n), now - timedelta(days=60, minutes=n))
        for n in range(5)
    ]
    pages: list[list[str]] = []
    async with api_client(services, tenant.key) as api:
        cursor = None
        while True:
            params = {"limit": 20, **({"cursor": cursor} if cursor else {})}
            page = (await api.get("/v1/submissions", params=params)).json()
            pages.append([s["id"] for s in page["data"]])
            cursor = page["next_cursor"]
            if cursor is None:
                break
    assert pages[0] == recent[:20]
    # The second page holds the rest of the recent ones, then the skewed ones, then the
    # late ones: the skewed ones are not left out for being in older weeks.
    assert pages[1] == recent[20:] + skewed + late[:5]
    assert [receipt for page in pages for receipt in page] == recent + skewed + late + old


async def test_upgrade__existing_rows_stay_readable_while_posts_land(
    empty_db_url: str, tmp_path: Path
) -> None:
    release = EarlierRelease(tmp_path, "0066_submission_keys.sql")
    async with await connect(empty_db_url) as conn:
        await release.install(conn)
        tenant, form = await setup_form(conn)
        before = [
            await make_submission(conn, tenant, form, {"n": n}, idempotency_key=f"old-{n}")
            for n in (1, 2)
        ]
        assert await release.upgrade(conn) == ["0066_submission_keys.sql"]
        applied = await migrate(conn, destination_types=DESTINATION_TYPES)
        assert applied == [
            "0067_weekly_submissions.sql",
            "0068_search_statistics.sql",
            "0069_gate_recent_weeks.sql",
        ]
        assert [await _partition_of(conn, s) for s in before] == ["submissions_legacy"] * 2
        keys = await rows(
            conn, "SELECT idempotency_key, submission_id FROM submission_keys ORDER BY 1"
        )
        assert keys == [
            {"idempotency_key": "old-1", "submission_id": before[0]},
            {"idempotency_key": "old-2", "submission_id": before[1]},
        ]
        async with built_services(empty_db_url, tmp_path / "services") as services:
            async with submit_client(services) as client:
                posted = await client.post(
                    f"/s/{form}", data={"n": "3", "_idempotency_key": "new"}, headers=JSON_ACCEPT
                )
            assert posted.status_code == 201, posted.text
            async with api_client(services, tenant.key) as api:
                listed = (await api.get("/v1/submissions")).json()
                for submission in before:
                    detail = await api.get(f"/v1/submissions/{submission}")
                    assert detail.status_code == 200
    assert {s["id"] for s in listed["data"]} == {*before, posted.json()["receipt"]}
