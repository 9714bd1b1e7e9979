"""Slow export readers against a real `postbag serve` with a pool of 4 connections: twelve
clients that stop reading a large CSV export hold no database connection, `/health` and
another organization's submit keep answering, and each reader still gets every row."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import httpx
import pytest

from core.http.agents.tools import csv_records
from core.platform.db import Conn
from core.platform.ids import new_id
from tests.support.builders import make_form, make_tenant
from tests.support.cli import serving_process, subprocess_env
from tests.support.hostile import SlowReader, health_watch, settled
from tests.support.records import rows
from tests.support.settings import TEST_SECRET_KEY

pytestmark = pytest.mark.slow

READERS = 12
SUBMISSIONS = 2000
HEALTH_BOUND = 1.0


async def test_slow_exports__twelve_stalled_readers_hold_no_connection(
    db_url: str, conn: Conn, tmp_path: Path
) -> None:
    acme = await make_tenant(conn, name="Acme", plan="pro")
    form = await make_form(conn, acme)
    values = json.dumps({f"field_{i:02}": "v" * 100 for i in range(60)})  # 6 KB a row
    await conn.execute(
        """INSERT INTO submissions (id, organization_id, form_id, status, "values", payload_hash)
           SELECT id, %(org)s, %(form)s, 'accepted', %(values)s, '\\x00'
             FROM unnest(%(ids)s::text[]) AS id""",
        {
            "org": acme.org,
            "form": form,
            "values": values,
            "ids": [new_id("sub") for _ in range(SUBMISSIONS)],
        },
    )
    other = await make_tenant(conn, name="Other")
    other_form = await make_form(conn, other)
    env = subprocess_env(
        POSTBAG_DATABASE_URL=db_url,
        POSTBAG_SECRET_KEY=TEST_SECRET_KEY,
        POSTBAG_STORAGE_URL=f"file://{tmp_path / 'files'}",
        POSTBAG_DB_POOL_MAX="4",
    )
    with serving_process(env) as (base, proc):
        readers = [SlowReader(base, acme.key, form) for _ in range(READERS)]
        await asyncio.gather(*(reader.begin() for reader in readers))
        await settled(proc.pid)  # every export is now blocked writing to its reader
        async with health_watch(base, pid=proc.pid) as watch:
            in_transaction = await rows(
                conn,
                "SELECT count(*) AS n, string_agg(query, ' | ') AS q FROM pg_stat_activity "
                "WHERE datname = current_database() AND state LIKE 'idle in transaction%%'",
            )
            async with httpx.AsyncClient(base_url=base, timeout=30) as client:
                started = time.monotonic()
                submitted = await client.post(f"/s/{other_form}", json={"name": "Ada"})
                submit_wait = time.monotonic() - started
            await asyncio.sleep(1)
        exports = await asyncio.gather(*(reader.finish() for reader in readers))
    assert in_transaction[0]["n"] == 0, in_transaction
    assert submitted.status_code == 201 and submit_wait < HEALTH_BOUND, submit_wait
    assert set(watch.statuses) == {200}, watch.statuses
    assert watch.stall < HEALTH_BOUND, watch.waits
    for text in exports:
        records = csv_records(text)
        assert len(records) == SUBMISSIONS + 1
        assert len({record.split(",", 1)[0] for record in records[1:]}) == SUBMISSIONS
