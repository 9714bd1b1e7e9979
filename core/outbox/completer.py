"""The completer of a pass: outcomes written in groups, each fenced by its claim token."""

from __future__ import annotations

import asyncio

import psycopg

from core.outbox import store
from core.platform.db import Database
from core.platform.errors import Unavailable
from core.platform.logs import log
from core.platform.metrics import count_attempt

# Tries of one group's write when the database fails it transiently (a dropped
# connection, a deadlock victim, a moment without a connection), and the first wait
# between them (doubling).
WRITE_TRIES = 4
RETRY_WAIT = 0.1

# How long the first outcome of a group waits for others before it is written: sends that
# end within it share the statement (its claim stays ours meanwhile; `sent_at` is the
# time the answer came, not the time of the write).
GATHER = 0.01

# What a retry can cure: the pool's "database unavailable" (connection errors come
# through as this) and Postgres's own transient failures.
_TRANSIENT = (Unavailable, psycopg.OperationalError)


class Completer:
    """Outcomes written in groups: the outcomes of the sends that end within GATHER of the
    first, and while a statement is in flight, go together in the next (one round trip for
    all)."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._waiting: list[tuple[store.Outcome, asyncio.Future[bool]]] = []
        self._writer: asyncio.Task[None] | None = None

    async def write(self, outcome: store.Outcome) -> bool:
        """Write `outcome` with the others waiting; whether its claim was still ours."""
        written: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._waiting.append((outcome, written))
        if self._writer is None:
            self._writer = asyncio.create_task(self._write_waiting())
        return await written

    async def _write_waiting(self) -> None:
        try:
            while self._waiting:
                await asyncio.sleep(GATHER)
                group, self._waiting = self._waiting, []
                try:
                    won = await self._finish([outcome for outcome, _ in group])
                except Exception as exc:
                    # Given up (each send's task logs it): the claims stay `sending` until
                    # their lease expires; the attempts they spent count.
                    for _, written in group:
                        if not written.done():
                            written.set_exception(exc)
                    continue
                for (outcome, written), result in zip(group, won, strict=True):
                    if outcome.attempt is not None:
                        count_attempt(outcome.claim.channel, outcome.status if result else "fenced")
                    # Done already when its send's task was cancelled: written all the same.
                    if not written.done():
                        written.set_result(result)
        finally:
            self._writer = None

    async def _finish(self, outcomes: list[store.Outcome]) -> list[bool]:
        """One group's write (one atomic statement), tried again on a transient failure.

        A write that committed but whose answer was lost finds, on its retry, the claims'
        tokens cleared: those outcomes read as fenced (the attempt is recorded once more,
        as `fenced`), and the delivery keeps the outcome written first.
        """
        wait = RETRY_WAIT
        for _ in range(WRITE_TRIES - 1):
            try:
                async with self._db.connection() as conn:
                    return await store.finish(conn, outcomes)
            except _TRANSIENT as exc:
                log.warning(
                    "outcome write failed, trying again",
                    extra={"detail": {"error": type(exc.__cause__ or exc).__name__}},
                )
                await asyncio.sleep(wait)
                wait *= 2
        async with self._db.connection() as conn:
            return await store.finish(conn, outcomes)

    async def close(self) -> None:
        """Wait for the outcomes still being written (the end of a pass)."""
        if self._writer is not None:
            await self._writer
