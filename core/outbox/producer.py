"""The producer of a pass: claims due deliveries in short transactions, ahead of the sends,
and starts the executor on each, within the window and the time budget."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from core.outbox import rates, store
from core.outbox.executor import execute
from core.outbox.store import Claim
from core.platform.logs import log

if TYPE_CHECKING:
    from core.outbox.passes import PassState

# Seconds between claims while sends are in flight and nothing was due.
POLL = 0.2
# Once a claim found fewer due rows than it had room for, the most time before the next
# (while sends are in flight), which comes sooner once half of those sends have ended: new
# rows come due with each submit, and a busy destination's room frees as each of its sends
# ends, so claiming again at every send's end would be a claim per row; once most of a
# destination's sends are answered, one claim refills its room with what came due
# meanwhile. The worker's wake-up waits as long after a notification (core/ticks/worker.py).
CLAIM_PAUSE = 0.05
# A claim that found nothing while a destination's rate holds rows back looks again when its
# next token is due (within POLL), if that is within RATE_HORIZON seconds; a later token is
# left to the worker's next pass (a notification or its tick: core/outbox/rates.py).
RATE_HORIZON = 5.0


class Producer:
    """The claim loop of one pass and the sends it started."""

    def __init__(self, state: PassState) -> None:
        self._state = state
        self._tasks: set[asyncio.Task[None]] = set()
        self._claim_of: dict[asyncio.Task[None], Claim] = {}
        # Done once the pass is told to stop (`PassState.stop`).
        self._stopped: asyncio.Future[Any]

    async def run(self, deadline: float, claims_ended: Callable[[bool], None]) -> None:
        """Claim and send until nothing is due, the budget (ending at the monotonic
        `deadline`) leaves no room for another send or the pass is told to stop, then see
        the sends in flight out. `claims_ended` is called once the last claim is made, with
        whether rows may still be due (the budget ended the claims, not an empty claim)."""
        self._stopped = asyncio.ensure_future(self._state.stop.wait())
        try:
            await self._run(deadline, claims_ended)
        finally:
            self._stopped.cancel()

    async def _run(self, deadline: float, claims_ended: Callable[[bool], None]) -> None:
        state, tasks = self._state, self._tasks
        opts = state.options
        # Claimed ahead of the sends, and claimed in groups of at least `concurrency` (a claim
        # is one statement whatever its size) rather than a few rows as each send ends. The
        # window is the process's: it counts the claims of overlapping passes too.
        window = opts.concurrency * 4
        claimed = state.claimed
        # New claims stop once a send started now might not finish within the budget; the
        # first batch is always taken, so a short budget still makes progress.
        first = True
        more_due = True
        while not state.stop.is_set() and (
            first or deadline - time.monotonic() > opts.timeout + opts.margin
        ):
            first = False
            room = window - len(claimed)
            if room < opts.concurrency:
                # The process holds all the claims it may: none could be made by another pass
                # either. Until one of them ends.
                await self._wait(claimed)
                continue
            # Sends in flight when the claim began: their destinations' room may have been
            # full for it, and may be free by the time it answers.
            sending = bool(tasks)
            asked = min(opts.batch, room)
            token_wait: float | None = None
            async with state.services.db.connection() as conn:
                claims = await store.claim_due(
                    conn,
                    now=state.now(),
                    limit=asked,
                    lease=opts.lease,
                    per_destination=opts.per_destination,
                )
                if not claims and not sending:
                    # A token due a moment ago too: a claim may have passed its destination
                    # over then (its row held by another statement).
                    now = state.now()
                    token_at = await rates.next_token_at(
                        conn, now=now, since=now - timedelta(seconds=POLL)
                    )
                    if token_at is not None:
                        token_wait = (token_at - state.now()).total_seconds()
            state.stats["claimed"] += len(claims)
            if not claims and not sending:
                if token_wait is None or token_wait > RATE_HORIZON:
                    more_due = False
                    break
                # Rows a destination's rate held back: claimed as its next token is due.
                await self._wait(set(), timeout=min(max(token_wait, CLAIM_PAUSE), POLL))
                continue
            for claim in claims:
                task = asyncio.create_task(execute(claim, state))
                tasks.add(task)
                claimed.add(task)
                self._claim_of[task] = claim
                task.add_done_callback(tasks.discard)
                task.add_done_callback(claimed.discard)
            if len(claims) < asked and tasks:
                # Sends in flight may make more rows due (a probe's success releases its
                # destination's backlog, an answer frees a busy destination's room), and
                # new ones come due: look again after a moment, or, with nothing claimed,
                # once a send ends (within POLL).
                await self._settle(CLAIM_PAUSE)
                if not claims and tasks:
                    await self._wait(tasks, timeout=POLL - CLAIM_PAUSE)
        claims_ended(more_due and not state.stop.is_set())
        if tasks and not state.stop.is_set():
            # Until every send has ended, the pass is told to stop, or a strict budget ends.
            timeout = max(deadline - time.monotonic(), 0) if opts.strict_budget else None
            every = asyncio.ensure_future(asyncio.wait(set(tasks)))
            await asyncio.wait(
                {every, self._stopped}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
            every.cancel()
            if tasks and not state.stop.is_set():
                await self._give_back(set(tasks), "pass_ended")
        if state.stop.is_set():
            await self._drain()

    async def _settle(self, seconds: float) -> None:
        """Until half the sends in flight now have ended (their destinations' room is free
        again), the pass is told to stop, or `seconds` have gone by."""
        waiting = set(self._tasks)
        needed = len(waiting) - len(waiting) // 2
        settled = asyncio.get_running_loop().create_future()
        ended = 0

        def one_ended(_task: asyncio.Task[None]) -> None:
            nonlocal ended
            ended += 1
            if ended >= needed and not settled.done():
                settled.set_result(None)

        for task in waiting:
            task.add_done_callback(one_ended)
        try:
            await asyncio.wait(
                {settled, self._stopped}, timeout=seconds, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            for task in waiting:
                task.remove_done_callback(one_ended)
            settled.cancel()

    async def _wait(self, sends: set[asyncio.Task[None]], *, timeout: float | None = None) -> None:
        """Until one of `sends` ends, the pass is told to stop, or `timeout` seconds have
        gone by."""
        await asyncio.wait(
            {*sends, self._stopped}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
        )

    async def _drain(self) -> None:
        """The pass was told to stop: give back at once the claims whose send has not begun,
        let the sends under way finish for up to `drain` seconds, then give back the rest."""
        state = self._state
        waiting = {t for t in self._tasks if self._claim_of[t].id not in state.started}
        if waiting:
            await self._give_back(waiting, "worker_stopped")
        if self._tasks:
            _, late = await asyncio.wait(set(self._tasks), timeout=state.options.drain)
            if late:
                await self._give_back(late, "worker_stopped")

    async def stop(self) -> None:
        """Stop the sends still in flight (a cancelled pass): their claims expire and another
        pass takes them."""
        for task in self._tasks:
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _give_back(self, late: set[asyncio.Task[None]], detail: str) -> None:
        """Stop these sends (the budget ran out, or the worker is stopping) and give their
        claims back at once, attempts unspent, rather than leave them to their lease."""
        state = self._state
        for task in late:
            task.cancel()
        await asyncio.gather(*late, return_exceptions=True)
        claims = [self._claim_of[task] for task in late]
        async with state.services.db.connection() as conn:
            given = set(await store.give_back_claims(conn, claims, now=state.now(), detail=detail))
        for claim in claims:
            if claim.id in given:
                state.stats["given_back"] += 1
                log.info("claim given back", extra={**claim.log_ids, "detail": detail})
