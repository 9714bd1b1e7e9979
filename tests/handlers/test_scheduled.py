"""The digest and retention functions answer a scheduled event with one pass; so does
`postbag tick digest|retention`."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from pathlib import Path

import pytest

from core.platform.clock import utcnow
from core.platform.db import Conn
from tests.support.builders import make_route_to, make_submission, setup_form
from tests.support.cli import postbag, subprocess_env
from tests.support.lambdas import FakeContext, invoke, load_event
from tests.support.settings import TEST_SECRET_KEY


async def _digest_world(conn: Conn) -> None:
    tenant, form = await setup_form(conn, plan="self_hosted", routes=0)
    _, rte = await make_route_to(conn, tenant, form, config={"url": "https://example.com/h"})
    now = utcnow()
    await conn.execute(
        "UPDATE routes SET mode = 'digest', period = 'daily', updated_at = %(at)s"
        " WHERE id = %(rte)s",
        {"rte": rte, "at": now - timedelta(days=3)},
    )
    await make_submission(conn, tenant, form, {}, id="sub_due", received_at=now - timedelta(days=2))
    # And one expired submission for the retention pass.
    await make_submission(
        conn,
        tenant,
        form,
        {},
        id="sub_old",
        received_at=now - timedelta(days=2),
        erase_at=now - timedelta(days=1),
    )


@pytest.mark.parametrize(
    ("name", "counter", "tick"),
    [("digest_tick", "digests", "digest"), ("retention_tick", "expired", "retention")],
)
async def test_tick_handler__one_pass_on_a_scheduled_event(
    db_url: str,
    conn: Conn,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    counter: str,
    tick: str,
) -> None:
    await _digest_world(conn)
    event = load_event("eventbridge_scheduled.json")
    first, warm = await asyncio.to_thread(
        invoke,
        name,
        [event, event],
        FakeContext(remaining_ms=20_000),
        monkeypatch,
        POSTBAG_DATABASE_URL=db_url,
        POSTBAG_SECRET_KEY=TEST_SECRET_KEY,
        POSTBAG_STORAGE_URL=f"file://{tmp_path / 'files'}",
    )
    assert first[counter] == 1
    assert warm.get(counter, 0) == 0
    cur = await conn.execute("SELECT tick FROM worker_heartbeats")
    assert [row["tick"] for row in await cur.fetchall()] == [tick]


async def test_cli_tick__digest_and_retention(db_url: str, conn: Conn, tmp_path: Path) -> None:
    await _digest_world(conn)
    env = subprocess_env(
        POSTBAG_DATABASE_URL=db_url, POSTBAG_STORAGE_URL=f"file://{tmp_path / 'files'}"
    )
    for name, counter in (("digest", "digests"), ("retention", "expired")):
        result = await asyncio.to_thread(postbag, "tick", name, "--budget", "5", env=env)
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout.strip().splitlines()[-1])[counter] == 1
