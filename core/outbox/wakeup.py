"""Waking the deliverers once deliveries are due: the channel, the NOTIFY and the LISTEN.

After a commit that queued deliveries (a submit, an ingested event, a release from
quarantine, a retry by hand, a replay) `wake_deliveries` wakes whatever delivers: where a
deliver function is named (`POSTBAG_DELIVER_FUNCTION_NAME`, the cloud), an asynchronous
invoke of it (core/platform/deliver_function.py), at most one per WAKE_INTERVAL_SECONDS per
process (a Lambda sandbox), bounded by INVOKE_TIMEOUT_SECONDS; otherwise a NOTIFY on CHANNEL,
at most one per NOTIFY_INTERVAL per event loop, which the workers of `postbag worker` and
`postbag dev` hear through `listen`. Either is an accelerator: a failure is logged and the
delivery waits for the next scheduled pass or poll.
"""

from __future__ import annotations

import asyncio
import time
import weakref

import psycopg

from core.platform import deliver_function
from core.platform.logs import log
from core.platform.queries import queries
from core.platform.services import Registry, Services

# The channel the deliverers LISTEN on.
CHANNEL = "postbag_deliveries"
# The least time between two NOTIFYs of one process. A worker gathers the notifications of
# a burst for as long (core/ticks/worker.py) before its pass, so more would wake nothing more;
# a submit that asks within it is covered by one NOTIFY at its end.
NOTIFY_INTERVAL = 0.05


class _Waker:
    """Coalesces wake-ups: one NOTIFY at a time, the next no sooner than NOTIFY_INTERVAL
    after it, for everything that asked meanwhile."""

    def __init__(self) -> None:
        self.pending = False
        self.running: asyncio.Task[None] | None = None
        self.last = float("-inf")  # when the last NOTIFY went out (monotonic seconds)

    async def _run(self, services: Services) -> None:
        while self.pending:
            wait = self.last + NOTIFY_INTERVAL - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            self.pending = False
            self.last = time.monotonic()
            try:
                await notify_workers(services)
            except Exception:
                log.warning("could not notify the delivery worker; it will poll")
                return

    async def wake(self, services: Services) -> None:
        self.pending = True
        if self.running is None or self.running.done():
            self.running = asyncio.create_task(self._run(services))
        # Waiting (after the response went out) keeps a Lambda invocation alive until its
        # wake-up did.
        await asyncio.shield(self.running)


# The process's coalescer of each event loop (tests and the Lambda handler run several).
_WAKERS: Registry[weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Waker]] = Registry(
    "delivery wakers", weakref.WeakKeyDictionary
)
# When the process last invoked each deliver function (monotonic seconds).
_INVOKED: Registry[dict[str, float]] = Registry("deliver function invokes", dict)


async def wake_deliveries(services: Services) -> None:
    """Wake whatever delivers (the deliver function, or the workers listening); a failure
    only delays delivery until the next scheduled pass or poll."""
    name = services.settings.deliver_function_name
    if name:
        invoked = services.state(_INVOKED)
        now = time.monotonic()
        if now - invoked.get(name, float("-inf")) < deliver_function.WAKE_INTERVAL_SECONDS:
            return  # the invocation woken by the last one is still passing
        invoked[name] = now
        await deliver_function.client_for(services, name).wake()
        return
    wakers = services.state(_WAKERS)
    loop = asyncio.get_running_loop()
    waker = wakers.get(loop)
    if waker is None:
        waker = wakers[loop] = _Waker()
    await waker.wake(services)


def prepare_wakeup(services: Services) -> None:
    """Build the deliver function's client now (a handler's import, the cold start) rather
    than within the first submit's bound."""
    name = services.settings.deliver_function_name
    if name:
        deliver_function.client_for(services, name)


async def notify_workers(services: Services) -> None:
    """One NOTIFY now, uncoalesced (a worker giving back claims as it stops)."""
    async with services.db.connection() as conn:
        await conn.execute(queries["notify_deliveries"], {"channel": CHANNEL})


async def listen(url: str, wake: asyncio.Event, *, connect_timeout: float) -> None:
    """Set `wake` on every notification on CHANNEL, and once each time the LISTEN begins
    (rows may have come due while nothing listened); reconnect when the link drops. Runs
    until cancelled. A lost notification costs at most the worker's tick interval."""
    while True:
        try:
            conn = await psycopg.AsyncConnection.connect(
                url, autocommit=True, connect_timeout=max(1, round(connect_timeout))
            )
            async with conn:
                await conn.execute(f"LISTEN {CHANNEL}")
                wake.set()
                async for _notify in conn.notifies():
                    wake.set()
        except psycopg.Error:
            log.warning("LISTEN connection lost; retrying", extra={"tick": "deliver"})
            await asyncio.sleep(1.0)
