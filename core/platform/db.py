"""The Postgres connection pool, and the two ways to run work: as owner, or scoped.

Connection trouble (unreachable, restarting, a killed backend) surfaces as `Unavailable`;
the pool checks a connection before handing it out, so dead ones are discarded and the
next request after the database is back succeeds without restarting the process. The check
costs no round trip for a connection in steady use: see `Database._check`.
"""

from __future__ import annotations

import asyncio
import math
import select
import time
import weakref
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypeAlias

import psycopg
from psycopg.rows import DictRow, dict_row
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from core.platform.errors import Unavailable
from core.platform.queries import queries
from core.platform.scope import OrgScope

Conn: TypeAlias = psycopg.AsyncConnection[DictRow]

# Errors that mean "the database is not there right now", never "the request was wrong".
_UNAVAILABLE = (psycopg.OperationalError, psycopg.errors.AdminShutdown, PoolTimeout)

# A pooled connection unused for longer than this is pinged before it is handed out.
IDLE_PING_SECONDS = 5.0

# A process measures its read replica's lag at most once in this many seconds; the reads in
# between answer with the last measurement.
LAG_MEASURED_EVERY = 1.0


@dataclass(frozen=True, slots=True)
class ReplicaLag:
    """How far the read replica was behind the primary when last measured, in seconds; None
    when the replica does not report it (Aurora's and Neon's replicas may not)."""

    seconds: float | None


async def _configure(conn: Conn) -> None:
    """Session settings of every pooled connection, set once when it opens.

    `jit = off`: Postbag's statements are short, and with a large table the planner's
    estimates pass `jit_above_cost`, where compiling a claim's plan cost ~100 ms against a
    few milliseconds to run it. Behind a transaction pooler a session setting would land
    on one server connection of many (and stay there for other clients): there it is not
    set, and the operator sets it for the role (docs/self-host.md).
    """
    await conn.execute("SET jit = off")


def _has_input(conn: Conn) -> bool:
    """Whether an idle connection's socket has something to read (without reading it).

    An idle connection is sent nothing, except when its backend goes away: a terminated
    backend or a shutting-down server sends a FATAL error and closes the socket.
    """
    poller = select.poll()
    poller.register(conn.pgconn.socket, select.POLLIN)
    return bool(poller.poll(0))


class Database:
    """A lazily opened pool bound to the event loop that first uses it."""

    def __init__(
        self,
        url: str,
        *,
        min_size: int = 1,
        max_size: int = 10,
        connect_timeout: float = 5.0,
        wait_timeout: float = 10.0,
        transaction_pooler: bool = False,
        read_url: str | None = None,
    ) -> None:
        self.url = url
        # The read replica's pool (`reading`), opened on first use; None: reads go here.
        self._reader = (
            Database(
                read_url,
                min_size=0,
                max_size=max_size,
                connect_timeout=connect_timeout,
                wait_timeout=wait_timeout,
                transaction_pooler=transaction_pooler,
            )
            if read_url
            else None
        )
        self._transaction_pooler = transaction_pooler
        self._min_size = min_size
        self._max_size = max_size
        self._connect_timeout = connect_timeout
        self._wait_timeout = wait_timeout
        self._pool: AsyncConnectionPool[Conn] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        # When each pooled connection was last given back (monotonic seconds).
        self._returned: weakref.WeakKeyDictionary[Conn, float] = weakref.WeakKeyDictionary()
        # This server's lag behind its primary as last measured, and when (monotonic).
        self._lag = ReplicaLag(None)
        self._lag_at = -math.inf

    async def _check(self, conn: Conn) -> None:
        """The pool's check before handing out `conn`: raise if it is dead.

        A round trip (an empty query) only for a connection never handed out, idle for
        more than IDLE_PING_SECONDS, or with input waiting (what a killed backend or a
        restarting server leaves); a connection in steady use is handed out unpinged.
        """
        returned = self._returned.get(conn)
        if returned is None or time.monotonic() - returned > IDLE_PING_SECONDS or _has_input(conn):
            await AsyncConnectionPool.check_connection(conn)

    async def _ensure_pool(self) -> AsyncConnectionPool[Conn]:
        loop = asyncio.get_running_loop()
        if self._pool is not None and self._loop is not loop:
            # A new event loop (a new Lambda invocation loop, a test) cannot use the old
            # loop's connections: drop them without awaiting the dead loop.
            self._pool = None
        if self._pool is None:
            pool: AsyncConnectionPool[Conn] = AsyncConnectionPool(
                self.url,
                min_size=self._min_size,
                max_size=self._max_size,
                timeout=self._wait_timeout,
                kwargs={
                    "row_factory": dict_row,
                    "autocommit": True,
                    "connect_timeout": max(1, round(self._connect_timeout)),
                    # psycopg prepares a statement on the server after its fifth run on a
                    # connection; behind a transaction pooler the next run may reach
                    # another server connection, where it does not exist (or already does).
                    **({"prepare_threshold": None} if self._transaction_pooler else {}),
                },
                check=self._check,
                configure=None if self._transaction_pooler else _configure,
                open=False,
                name="postbag",
            )
            await pool.open(wait=False)
            self._pool, self._loop = pool, loop
        return self._pool

    async def close(self) -> None:
        """Close every pooled connection (the runner and tests call this on exit)."""
        if self._pool is not None:
            await self._pool.close()
            self._pool = None
        if self._reader is not None:
            await self._reader.close()

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[Conn]:
        """A pooled autocommit connection as the owner role."""
        try:
            pool = await self._ensure_pool()
            async with pool.connection() as conn:
                try:
                    yield conn
                finally:
                    self._returned[conn] = time.monotonic()
        except _UNAVAILABLE as exc:
            raise Unavailable(f"database unavailable: {type(exc).__name__}") from exc

    async def fetch_one(self, query: str, params: Mapping[str, Any]) -> DictRow | None:
        """The first row of a read-only `query` on a pooled connection.

        When that connection turns out dead (its backend was killed, or the server
        restarted, and the goodbye had not yet arrived when the pool checked it), the query
        runs once more on another: reading twice is harmless, and it spares the request a 503.
        """
        async with self.connection() as conn:
            try:
                cur = await conn.execute(query, params)
                return await cur.fetchone()
            except psycopg.OperationalError:
                if not conn.broken:
                    raise
        # The pool discarded the dead connection; the one it hands out now was checked.
        async with self.connection() as conn:
            cur = await conn.execute(query, params)
            row = await cur.fetchone()
        return row

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Conn]:
        """One transaction as the owner role (cross-organization work: submit lookup, ticks)."""
        async with self.connection() as conn, conn.transaction():
            yield conn

    @asynccontextmanager
    async def scoped(self, scope: OrgScope) -> AsyncIterator[Conn]:
        """One transaction as `postbag_app`, where row-level security shows one organization."""
        async with self.transaction() as conn:
            await enter_scope(conn, scope)
            yield conn

    @asynccontextmanager
    async def reading(self, scope: OrgScope, *, fresh: bool = False) -> AsyncIterator[Conn]:
        """One read-only transaction scoped like `scoped`, on the read replica when one is
        set (`POSTBAG_READ_DATABASE_URL`) unless `fresh` asks for the primary (a page
        right after its reader's own change). For what may lag a moment: lists, searches,
        exports, counts; never for what a decision or a change reads. Read-only on the
        primary too, so a write routed here fails everywhere, not only with a replica."""
        async with self._read_source(fresh).connection() as conn, conn.transaction():
            await conn.execute("SET TRANSACTION READ ONLY")
            await enter_scope(conn, scope)
            yield conn

    def _read_source(self, fresh: bool) -> Database:
        """The database `reading(fresh=fresh)` reads from."""
        return self if fresh or self._reader is None else self._reader

    async def replica_lag(self, *, fresh: bool = False) -> ReplicaLag | None:
        """How far behind the primary `reading(fresh=fresh)` reads: None when they come
        from the primary. Measured on the replica at most once every LAG_MEASURED_EVERY
        seconds per process, so a read costs no extra round trip in between."""
        source = self._read_source(fresh)
        if source is self:
            return None
        if time.monotonic() - source._lag_at >= LAG_MEASURED_EVERY:
            source._lag = await source._measure_lag()
            source._lag_at = time.monotonic()
        return source._lag

    async def _measure_lag(self) -> ReplicaLag:
        try:
            row = await self.fetch_one(queries["replica_lag"], {})
        except psycopg.Error:
            # A managed replica that refuses the recovery functions (connection trouble
            # raises `Unavailable` instead, as every read does): its lag is not known.
            return ReplicaLag(None)
        seconds = row["seconds"] if row is not None else None
        return ReplicaLag(None if seconds is None else float(seconds))

    def connection_counts(self) -> dict[str, int]:
        """The pool's connections by state (`idle`, `in_use`) and the requests `waiting`
        for one; all zero before the pool opens."""
        if self._pool is None:
            return {"idle": 0, "in_use": 0, "waiting": 0}
        stats = self._pool.get_stats()
        idle = stats.get("pool_available", 0)
        return {
            "idle": idle,
            "in_use": stats.get("pool_size", 0) - idle,
            "waiting": stats.get("requests_waiting", 0),
        }


async def enter_scope(conn: Conn, scope: OrgScope) -> None:
    """Switch the current transaction to `postbag_app` limited to `scope`'s organization."""
    await conn.execute("SET LOCAL ROLE postbag_app")
    await conn.execute(
        "SELECT set_config('postbag.organization_id', %(org)s, true)",
        {"org": scope.organization_id},
    )


async def connect(url: str, **kwargs: Any) -> Conn:
    """One autocommit connection outside the pool (CLI, migrations): no session settings
    and no prepared statements, so that it works through any pooler (a one-shot command
    runs few statements, none often enough to gain from either)."""
    try:
        conn = await psycopg.AsyncConnection.connect(
            url, autocommit=True, row_factory=dict_row, prepare_threshold=None, **kwargs
        )
    except psycopg.OperationalError as exc:
        raise Unavailable(f"database unavailable: {exc}".splitlines()[0]) from exc
    return conn
