"""The producer of a pass: claims due deliveries in short transactions, ahead of the sends,
and starts the executor on each, within the window and the time budget."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from core.outbox import store
from core.outbox.executor import execute
from core.outbox.store import Claim
from core.platform.logs import log

if TYPE_CHECKING:
    from core.outbox.worker import PassState

# Seconds between claims while sends are in flight and nothing was due.
POLL = 0.2


class Producer:
    """The claim loop of one pass and the sends it started."""

    def __init__(self, state: PassState) -> None:
        self._state = state
        self._tasks: set[asyncio.Task[None]] = set()
        self._claim_of: dict[asyncio.Task[None], Claim] = {}

    async def run(self, deadline: float) -> None:
        """Claim and send until nothing is due or the budget (ending at the monotonic
        `deadline`) leaves no room for another send, then see the sends in flight out."""
        state, tasks = self._state, self._tasks
        opts = state.options
        # Claimed ahead of the sends, and claimed in groups of at least `concurrency` (a claim
        # is one statement whatever its size) rather than a few rows as each send ends.
        window = opts.concurrency * 4
        # New claims stop once a send started now might not finish within the budget; the
        # first batch is always taken, so a short budget still makes progress.
        first = True
        while first or deadline - time.monotonic() > opts.timeout + opts.margin:
            first = False
            room = window - len(tasks)
            if tasks and room < opts.concurrency:
                await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
                continue
            # Sends in flight when the claim began: their destinations' room may have been
            # full for it, and may be free by the time it answers.
            sending = bool(tasks)
            async with state.services.db.connection() as conn:
                claims = await store.claim_due(
                    conn,
                    now=state.now(),
                    limit=min(opts.batch, room),
                    lease=opts.lease,
                    per_destination=opts.per_destination,
                )
            state.stats["claimed"] += len(claims)
            if not claims:
                if not sending:
                    break
                # Sends in flight may make more rows due (a probe's success releases its
                # destination's backlog, an answer frees a busy destination's room), and
                # new ones come due: look again shortly (at once if they have all ended).
                if tasks:
                    await asyncio.wait(tasks, timeout=POLL, return_when=asyncio.FIRST_COMPLETED)
                continue
            for claim in claims:
                task = asyncio.create_task(execute(claim, state))
                tasks.add(task)
                self._claim_of[task] = claim
                task.add_done_callback(tasks.discard)
        if tasks and opts.strict_budget:
            _, late = await asyncio.wait(tasks, timeout=max(deadline - time.monotonic(), 0))
            if late:
                await self._give_back(late)
        elif tasks:
            await asyncio.gather(*tasks)

    async def stop(self) -> None:
        """Stop the sends still in flight (a cancelled pass): their claims expire and another
        pass takes them."""
        for task in self._tasks:
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _give_back(self, late: set[asyncio.Task[None]]) -> None:
        """The budget ran out with sends in flight (a short Lambda budget): stop them and give
        their claims back at once, attempts unspent, rather than leave them to their lease."""
        state = self._state
        for task in late:
            task.cancel()
        await asyncio.gather(*late, return_exceptions=True)
        claims = [self._claim_of[task] for task in late]
        async with state.services.db.connection() as conn:
            given = set(
                await store.give_back_claims(conn, claims, now=state.now(), detail="pass_ended")
            )
        for claim in claims:
            if claim.id in given:
                state.stats["given_back"] += 1
                log.info("claim given back at the end of the pass", extra=claim.log_ids)
