"""The completer of a pass: outcomes written in groups, each fenced by its claim token."""

from __future__ import annotations

import asyncio

from core.outbox import store
from core.platform.db import Database


class Completer:
    """Outcomes written in groups: while one statement is in flight, the outcomes of the sends
    that end meanwhile wait, then go together in the next (one round trip for all)."""

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
                group, self._waiting = self._waiting, []
                try:
                    # One connection while groups keep coming (no pool check before each).
                    async with self._db.connection() as conn:
                        while True:
                            won = await store.finish(conn, [outcome for outcome, _ in group])
                            for (_, written), result in zip(group, won, strict=True):
                                # Done already when its send's task was cancelled: written
                                # all the same.
                                if not written.done():
                                    written.set_result(result)
                            if not self._waiting:
                                break
                            group, self._waiting = self._waiting, []
                except Exception as exc:
                    # Each send's task logs it; the claims stay `sending` until their lease
                    # expires, then another pass retries them.
                    for _, written in group:
                        if not written.done():
                            written.set_exception(exc)
        finally:
            self._writer = None

    async def close(self) -> None:
        """Wait for the outcomes still being written (the end of a pass)."""
        if self._writer is not None:
            await self._writer
