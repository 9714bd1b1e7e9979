"""Waking the delivery worker after a submit: one NOTIFY at a time per event loop."""

from __future__ import annotations

import asyncio
import weakref

from core.platform.logs import log
from core.platform.queries import queries
from core.platform.services import Services


class _Waker:
    """Coalesces wake-ups: at most one NOTIFY in flight per event loop, plus one more for
    everything that asked while it was in flight."""

    def __init__(self) -> None:
        self.pending = False
        self.running: asyncio.Task[None] | None = None

    async def _run(self, services: Services) -> None:
        while self.pending:
            self.pending = False
            try:
                async with services.db.connection() as conn:
                    await conn.execute(queries["notify_deliveries"], {"payload": ""})
            except Exception:
                log.warning("could not notify the delivery worker; it will poll")
                return

    async def wake(self, services: Services) -> None:
        self.pending = True
        if self.running is None or self.running.done():
            self.running = asyncio.create_task(self._run(services))
        # Waiting keeps a Lambda invocation alive until its wake-up went out.
        await asyncio.shield(self.running)


_wakers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Waker] = weakref.WeakKeyDictionary()


async def notify_deliveries(services: Services) -> None:
    """Wake the delivery worker; a failure only delays delivery until its next poll."""
    loop = asyncio.get_running_loop()
    waker = _wakers.get(loop)
    if waker is None:
        waker = _wakers[loop] = _Waker()
    await waker.wake(services)
