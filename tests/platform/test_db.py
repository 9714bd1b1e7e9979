"""The pool's check before handing out a connection: no round trip in steady use, yet a
connection whose backend was killed is never handed out dead."""

from __future__ import annotations

import asyncio

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool

from core.platform import db as db_module
from core.platform.db import Database


async def _backend_pid(database: Database) -> int:
    row = await database.fetch_one("SELECT pg_backend_pid() AS pid", {})
    assert row is not None
    return int(row["pid"])


async def _terminate(admin_url: str, pid: int) -> None:
    async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as admin:
        await admin.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))


@pytest.fixture
def pings(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every ping the pool's check sends."""
    seen: list[object] = []
    ping = AsyncConnectionPool.check_connection

    async def counted(conn: db_module.Conn) -> None:
        seen.append(conn)
        await ping(conn)

    monkeypatch.setattr(AsyncConnectionPool, "check_connection", staticmethod(counted))
    return seen


async def test_pool__pings_a_connection_only_on_its_first_handout_while_in_use(
    db_url: str, pings: list[object]
) -> None:
    database = Database(db_url, max_size=1)
    try:
        pids = {await _backend_pid(database) for _ in range(5)}
    finally:
        await database.close()
    assert len(pids) == 1
    assert len(pings) == 1


async def test_pool__a_killed_backend_is_discarded_by_the_check(
    db_url: str, admin_url: str, pings: list[object]
) -> None:
    database = Database(db_url, max_size=1)
    try:
        first = await _backend_pid(database)
        await _terminate(admin_url, first)
        await asyncio.sleep(0.05)  # the backend's goodbye reaches the socket
        second = await _backend_pid(database)
    finally:
        await database.close()
    assert second != first
    # Each connection's first handout, and the dead one's second, which failed.
    assert [id(conn) for conn in pings].count(id(pings[0])) == 2
    assert len(pings) == 3


async def test_fetch_one__runs_again_when_the_connection_dies_unnoticed(
    db_url: str, admin_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    database = Database(db_url, max_size=1)
    try:
        first = await _backend_pid(database)
        await _terminate(admin_url, first)
        # As if the backend's goodbye had not arrived yet when the pool checked.
        monkeypatch.setattr(db_module, "_has_input", lambda _conn: False)
        second = await _backend_pid(database)
    finally:
        await database.close()
    assert second != first
