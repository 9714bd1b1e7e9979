"""The long-running worker: the ticks pass after pass, woken by LISTEN, until stopped.

`postbag worker` runs it alone and `postbag dev` beside its HTTP server; the cloud runs the
same passes inside scheduled invocations instead (`scheduled.py`). Any number of workers may
run against one database, on any number of machines: claims are leased and fenced. On
SIGTERM (or SIGINT) a worker stops claiming, gives back at once the claims whose send has
not begun, lets the sends under way finish for up to its grace period, gives back the rest
with their attempts unspent, wakes the other workers so they take the given-back rows at
once, and exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Sequence
from typing import Any

from core.destinations.http import close_shared_client
from core.outbox.passes import WorkerOptions
from core.outbox.wakeup import listen, notify_workers
from core.outbox.worker import Deliverer
from core.platform.clock import utcnow
from core.platform.logs import log
from core.platform.services import Services
from core.ticks.registry import TICKS, Tick, record_heartbeat, run_pass

# After the first notification, how long to gather the others before a pass: a burst of
# submits costs one pass, not one per submit.
DEBOUNCE_SECONDS = 0.05
# A deliver pass's budget, as the cloud's tick and the local runner always had: it claims
# for its first few seconds, sees its sends out and ends (a heartbeat); the next pass may
# claim while it does.
DELIVER_BUDGET_SECONDS = 15.0
GRACE_SECONDS = 10.0
# Behind a transaction pooler with no direct URL nothing can LISTEN: the deliver pass runs
# this often instead of every 15 s. An idle pass costs three short transactions (releasing
# held rows, the claim finding nothing on the due index, the heartbeat upsert): measured
# (tests/bench/pooler.py), 1.7-2.0 a second per idle worker against 0.3-0.5 when it LISTENs.
POLL_SECONDS = 1.5
CONCURRENCY = WorkerOptions().concurrency
# The worker's connections: claims, grouped outcomes, breaker writes, one tick pass and a
# heartbeat at a time (the LISTEN connection is its own).
POOL_MAX = 4


class Worker:
    """The ticks of one process: `deliver` on notification or every 15 s (every
    POLL_SECONDS where it cannot LISTEN), the others on their schedule, until `stop` is set."""

    def __init__(
        self,
        services: Services,
        *,
        name: str,
        ticks: Sequence[str] = tuple(TICKS),
        concurrency: int = CONCURRENCY,
        grace: float = GRACE_SECONDS,
        deliver_budget: float = DELIVER_BUDGET_SECONDS,
    ) -> None:
        self.services = services
        self.name = name
        self.ticks = [TICKS[tick] for tick in ticks]
        self.grace = grace
        self.deliver_budget = deliver_budget
        self.stop = asyncio.Event()
        self.listen_url = services.settings.listen_url()
        self._wake = asyncio.Event()
        self._deliverer = Deliverer(
            services, options=WorkerOptions(concurrency=concurrency, drain=grace)
        )

    async def run(self) -> None:
        """Run every tick until `stop` is set and each has wound down."""
        loops = [
            self._deliver(tick) if tick.name == "deliver" else self._scheduled(tick)
            for tick in self.ticks
        ]
        listener = None
        if self.listen_url is not None and any(tick.name == "deliver" for tick in self.ticks):
            listener = asyncio.create_task(
                listen(
                    self.listen_url,
                    self._wake,
                    connect_timeout=self.services.settings.db_connect_timeout,
                )
            )
        try:
            await asyncio.gather(*loops)
        finally:
            if listener is not None:
                listener.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await listener

    async def _deliver(self, tick: Tick) -> None:
        """Pass after pass. A pass whose budget ended its claims may leave rows due: the
        next begins at once, claiming while the last one's sends end (a slow destination's
        sends never hold up the claims for the others). Otherwise the next waits for a
        notification or the tick."""
        passes: set[asyncio.Task[None]] = set()
        try:
            while not self.stop.is_set():
                more_due: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
                current = asyncio.create_task(self._deliver_pass(tick, more_due))
                passes.add(current)
                current.add_done_callback(passes.discard)
                ended: set[asyncio.Future[Any]] = {current, more_due}
                await asyncio.wait(ended, return_when=asyncio.FIRST_COMPLETED)
                if more_due.done() and more_due.result():
                    continue
                await current
                every = tick.every_seconds if self.listen_url is not None else POLL_SECONDS
                if await self._pause(every, self._wake):
                    # Let the rest of a burst of notifications arrive: one pass for all.
                    await self._pause(DEBOUNCE_SECONDS)
                    self._wake.clear()
        except asyncio.CancelledError:
            for running in passes:
                running.cancel()
            raise
        finally:
            await asyncio.gather(*passes, return_exceptions=True)

    async def _deliver_pass(self, tick: Tick, more_due: asyncio.Future[bool]) -> None:
        """One deliver pass and its heartbeat; `more_due` is set when its claims end."""

        def claims_ended(more: bool) -> None:
            if not more_due.done():
                more_due.set_result(more)

        now = utcnow()
        try:
            result = await self._deliverer.run_pass(
                now=now,
                budget=self.deliver_budget,
                stop=self.stop,
                claims_ended=claims_ended,
            )
            await record_heartbeat(self.services, tick, now=now, result=result, worker_id=self.name)
            if result.get("given_back"):
                await notify_workers(self.services)
        except Exception:
            log.exception("tick pass failed", extra={"tick": tick.name})
        if more_due.done() and more_due.result():
            # Its last sends have ended: their destinations' room is free for the backlog
            # this pass's budget left, which no pass under way may be claiming.
            self._wake.set()

    async def _scheduled(self, tick: Tick) -> None:
        """A pass of `tick` on its schedule; a pass under way when `stop` is set gets the
        grace period to finish, then is cancelled."""
        while not self.stop.is_set():
            await self._within_grace(
                run_pass(
                    self.services,
                    tick,
                    now=utcnow(),
                    budget=tick.every_seconds,
                    worker_id=self.name,
                ),
                tick,
            )
            await self._pause(tick.every_seconds)

    async def _within_grace(self, pass_: Awaitable[Any], tick: Tick) -> None:
        task = asyncio.ensure_future(pass_)
        stopped = asyncio.create_task(self.stop.wait())
        try:
            await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
            if not task.done():
                await asyncio.wait({task}, timeout=self.grace)
                task.cancel()
            await task
        except asyncio.CancelledError:
            if not task.cancelled():
                raise
            log.warning("tick pass stopped at shutdown", extra={"tick": tick.name})
        except Exception:
            log.exception("tick pass failed", extra={"tick": tick.name})
        finally:
            stopped.cancel()

    async def _pause(self, seconds: float, wake: asyncio.Event | None = None) -> bool:
        """Wait `seconds`, or less if `stop` (or `wake`) is set; whether `wake` was set."""
        events = [self.stop] if wake is None else [self.stop, wake]
        waits = [asyncio.create_task(event.wait()) for event in events]
        try:
            await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()
        return wake is not None and wake.is_set() and not self.stop.is_set()


def worker_services(services: Services, *, pool_max: int = POOL_MAX) -> Services:
    """Services for a worker beside an HTTP server: the same settings, a pool of its own."""
    return Services.from_settings(services.settings, pool_max=pool_max)


async def run_worker(
    services: Services, *, name: str, ticks: Sequence[str], concurrency: int, grace: float
) -> None:
    """Run until SIGTERM or SIGINT, then wind down within `grace`."""
    worker = Worker(services, name=name, ticks=ticks, concurrency=concurrency, grace=grace)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, worker.stop.set)
    log.info("worker started", extra={"detail": {"worker": name, "ticks": list(ticks)}})
    try:
        await worker.run()
    finally:
        await close_shared_client()
        await services.db.close()
    log.info("worker stopped", extra={"detail": {"worker": name}})
