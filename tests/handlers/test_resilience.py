"""The functions keep working across a PostgreSQL restart, without a new cold start."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from core.destinations.registry import DESTINATION_TYPES
from core.platform.db import connect
from core.platform.migrate import migrate
from tests.support.lambdas import FakeContext, invoke, load_event
from tests.support.settings import TEST_SECRET_KEY


@pytest.mark.slow
def test_submit_handler__survives_a_postgres_restart_between_invocations(
    pg_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pgserver import get_server
    from pgserver._commands import pg_ctl

    server = get_server(pg_home / "pg", cleanup_mode="delete")
    try:
        url = server.get_uri()

        async def prepare() -> None:
            conn = await connect(url)
            try:
                await migrate(conn, destination_types=DESTINATION_TYPES)
            finally:
                await conn.close()

        asyncio.run(prepare())

        def restart_after_first(index: int) -> None:
            if index == 0:
                pg_ctl(["-w", "restart"], pgdata=server.pgdata, user=server.system_user, timeout=60)

        event = load_event("function_url_get_health.json")
        before, after = invoke(
            "submit",
            [event, event],
            FakeContext(),
            monkeypatch,
            between=restart_after_first,
            POSTBAG_DATABASE_URL=url,
            POSTBAG_SECRET_KEY=TEST_SECRET_KEY,
            POSTBAG_DB_CONNECT_TIMEOUT="2",
        )
    finally:
        server.cleanup()
    assert before["statusCode"] == 200
    assert after["statusCode"] == 200, after
    assert json.loads(after["body"])["database"] is True
