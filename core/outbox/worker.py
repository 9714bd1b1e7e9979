"""One bounded pass of the outbox worker (docs/delivery.md).

A pass claims due deliveries in short transactions (the producer), sends them concurrently
through their adapters (the executor: one shared HTTP client per process, bounded
concurrency, a per-send timeout), and writes each outcome fenced by its claim token (the
completer); the breaker throttles failing destinations. No transaction is open during a send.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

import aiohttp

from core.destinations.http import shared_client
from core.destinations.ssrf import Resolver, system_resolver
from core.outbox import store
from core.outbox.breaker import Breaker
from core.outbox.completer import Completer
from core.outbox.passes import PassState, WorkerOptions
from core.outbox.producer import Producer
from core.platform.services import Services


class Deliverer:
    """The outbox worker of one process: run `run_pass` as often as the trigger says."""

    def __init__(
        self,
        services: Services,
        *,
        options: WorkerOptions | None = None,
        resolver: Resolver = system_resolver,
        http: aiohttp.ClientSession | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.services = services
        self.options = options or WorkerOptions()
        self.resolver = resolver
        self._http = http
        self._rng = rng or random.Random()
        # Sends in flight and claims not yet ended in this process, every pass together:
        # passes overlap when the next begins while the last one's sends end.
        self._sends = asyncio.Semaphore(self.options.concurrency)
        self._claimed: set[asyncio.Task[None]] = set()

    async def run_pass(
        self,
        *,
        now: datetime,
        budget: float,
        stop: asyncio.Event | None = None,
        claims_ended: Callable[[bool], None] = lambda _more_due: None,
    ) -> dict[str, Any]:
        """Drain due deliveries for at most `budget` seconds; return what happened.

        `claims_ended` is called once the pass makes no more claims, with whether rows may
        still be due (its budget ended the claims): the next pass can begin then, while
        this one's sends end. Once `stop` is set the pass claims nothing more, gives back at
        once the claims whose send has not begun, lets the sends under way finish for up to
        `options.drain` seconds and gives back the rest (their attempts unspent).
        """
        started = time.monotonic()
        deadline = started + budget
        db = self.services.db
        stats: Counter[str] = Counter()
        async with db.connection() as conn:
            stats["released"] = await store.release_held(conn, now=now)

        def clock() -> datetime:
            return now + timedelta(seconds=time.monotonic() - started)

        state = PassState(
            now=clock,
            services=self.services,
            options=self.options,
            resolver=self.resolver,
            rng=self._rng,
            http=self._http or shared_client(),
            stats=stats,
            completer=Completer(db),
            breaker=Breaker(db, stats, clock),
            sends=self._sends,
            claimed=self._claimed,
            stop=stop or asyncio.Event(),
        )
        producer = Producer(state)
        try:
            await producer.run(deadline, claims_ended)
        finally:
            # Cancelled (a shutdown): the sends in flight stop too; their claims expire and
            # another pass takes them.
            await producer.stop()
            await state.completer.close()
        return dict(stats)


async def deliver_pass(services: Services, now: datetime, budget: float) -> Mapping[str, Any]:
    """The `deliver` tick: one pass that never outlives its budget."""
    return await Deliverer(services, options=WorkerOptions(strict_budget=True)).run_pass(
        now=now, budget=budget
    )
