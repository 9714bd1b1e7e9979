"""One bounded pass of the outbox worker (SPEC §5).

A pass claims due deliveries in short transactions, sends them concurrently through their
adapters (one shared HTTP client per process, bounded concurrency, a per-send timeout),
and writes each outcome fenced by its claim token. No transaction is open during a send.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import aiohttp

from core.destinations.base import DeliveryContext, Result
from core.destinations.http import shared_client
from core.destinations.registry import ADAPTERS
from core.destinations.ssrf import Resolver, system_resolver
from core.outbox import store as outbox
from core.outbox.backoff import MAX_DELAY
from core.outbox.completer import Completer
from core.outbox.decide import decide
from core.outbox.store import Claim
from core.owner.alerts import raise_alert
from core.platform.logs import log
from core.platform.services import Services

# Failures that say nothing about the receiver's health (no request was made).
_NOT_THE_DESTINATION = frozenset({"invalid_target", "secret_missing", "email_not_configured"})


@dataclass(frozen=True, slots=True)
class WorkerOptions:
    """How much a pass takes on at once."""

    batch: int = 200
    concurrency: int = 32
    per_destination: int = 8
    lease: timedelta = timedelta(minutes=5)
    timeout: float = 10.0
    # Time kept back at the end of the budget to write the last outcomes.
    margin: float = 2.0
    # Whether sends still in flight when the budget ends are stopped and their claims given
    # back (the ticks: a Lambda invocation ends at its deadline), or awaited (a soft budget
    # that only stops new claims).
    strict_budget: bool = False


def skip_reason(claim: Claim, now: datetime) -> str | None:
    """The live check before a send: why this delivery must not go out, if it must not."""
    if claim.submission_id is not None:
        if claim.erased_at is not None:
            return "values_erased"
        if claim.erase_at is not None and claim.erase_at <= now:
            return "values_expired"
    if claim.destination_id is not None:
        if claim.destination_deleted_at is not None:
            return "destination_removed"
        if claim.destination_enabled is False:
            return "destination_paused"
    return None


@dataclass
class _Pass:
    started_now: datetime
    started_mono: float
    outcomes: Completer
    stats: Counter[str] = field(default_factory=Counter)
    # Destinations that may have a failure count to reset on the next success.
    dirty: dict[str, bool] = field(default_factory=dict)

    def now(self) -> datetime:
        return self.started_now + timedelta(seconds=time.monotonic() - self.started_mono)


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

    async def run_pass(self, *, now: datetime, budget: float) -> dict[str, Any]:
        """Drain due deliveries for at most `budget` seconds; return what happened."""
        state = _Pass(now, time.monotonic(), Completer(self.services.db))
        deadline = state.started_mono + budget
        async with self.services.db.connection() as conn:
            state.stats["released"] = await outbox.release_held(conn, now=now)
        http = self._http or shared_client()
        tasks: set[asyncio.Task[None]] = set()
        try:
            await self._drain(state, deadline, http, tasks)
        finally:
            # Cancelled (a shutdown): the sends in flight stop too; their claims expire and
            # another pass takes them.
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)
            await state.outcomes.close()
        return dict(state.stats)

    async def _drain(
        self,
        state: _Pass,
        deadline: float,
        http: aiohttp.ClientSession,
        tasks: set[asyncio.Task[None]],
    ) -> None:
        opts = self.options
        sends = asyncio.Semaphore(opts.concurrency)
        per_destination: dict[str, asyncio.Semaphore] = {}
        failing: dict[str, bool] = {}
        # Claimed ahead of the sends, and claimed in groups of at least `concurrency` (a claim
        # is one statement whatever its size) rather than a few rows as each send ends.
        window = opts.concurrency * 4
        claim_of: dict[asyncio.Task[None], Claim] = {}
        # New claims stop once a send started now might not finish within the budget; the
        # first batch is always taken, so a short budget still makes progress.
        first = True
        while first or deadline - time.monotonic() > opts.timeout + opts.margin:
            first = False
            room = window - len(tasks)
            if tasks and room < opts.concurrency:
                await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
                continue
            async with self.services.db.connection() as conn:
                claims = await outbox.claim_due(
                    conn, now=state.now(), limit=min(opts.batch, room), lease=opts.lease
                )
            state.stats["claimed"] += len(claims)
            if not claims:
                if not tasks:
                    break
                # Sends in flight may make more rows due (a probe's success releases its
                # destination's backlog): look again shortly.
                await asyncio.wait(tasks, timeout=0.5, return_when=asyncio.FIRST_COMPLETED)
                continue
            for claim in claims:
                task = asyncio.create_task(
                    self._handle(claim, state, http, sends, per_destination, failing)
                )
                tasks.add(task)
                claim_of[task] = claim
                task.add_done_callback(tasks.discard)
        if tasks and opts.strict_budget:
            _, late = await asyncio.wait(tasks, timeout=max(deadline - time.monotonic(), 0))
            if late:
                await self._give_back(late, claim_of, state)
        elif tasks:
            await asyncio.gather(*tasks)

    async def _give_back(
        self, late: set[asyncio.Task[None]], claim_of: dict[asyncio.Task[None], Claim], state: _Pass
    ) -> None:
        """The budget ran out with sends in flight (a short Lambda budget): stop them and give
        their claims back at once, attempts unspent, rather than leave them to their lease."""
        for task in late:
            task.cancel()
        await asyncio.gather(*late, return_exceptions=True)
        async with self.services.db.connection() as conn:
            for task in late:
                claim = claim_of[task]
                if await outbox.release(conn, claim, now=state.now(), detail="pass_ended"):
                    state.stats["given_back"] += 1
                    log.info("claim given back at the end of the pass", extra=claim.log_ids)

    async def _handle(
        self,
        claim: Claim,
        state: _Pass,
        http: aiohttp.ClientSession,
        sends: asyncio.Semaphore,
        per_destination: dict[str, asyncio.Semaphore],
        failing: dict[str, bool],
    ) -> None:
        try:
            await self._deliver_one(claim, state, http, sends, per_destination, failing)
        except Exception:
            # The claim stays `sending` until its lease expires, then another pass retries it.
            state.stats["errors"] += 1
            log.exception("delivery handling failed", extra=claim.log_ids)

    async def _deliver_one(
        self,
        claim: Claim,
        state: _Pass,
        http: aiohttp.ClientSession,
        sends: asyncio.Semaphore,
        per_destination: dict[str, asyncio.Semaphore],
        failing: dict[str, bool],
    ) -> None:
        db = self.services.db
        reason = skip_reason(claim, state.now())
        if reason is not None:
            await state.outcomes.write(
                outbox.Outcome(claim, state.now(), "skipped", reason, reason)
            )
            state.stats["skipped"] += 1
            log.info("delivery skipped", extra={**claim.log_ids, "detail": {"reason": reason}})
            return
        if claim.over_quota:
            async with db.connection() as conn:
                await outbox.release(conn, claim, now=state.now(), held=True, detail="over_quota")
            state.stats["held"] += 1
            return
        destination = claim.destination_id
        gate = asyncio.Semaphore(1_000_000)
        if destination is not None:
            gate = per_destination.setdefault(
                destination, asyncio.Semaphore(self.options.per_destination)
            )
            failing.setdefault(destination, claim.destination_health == "failing")
            state.dirty.setdefault(
                destination,
                claim.destination_health != "healthy" or bool(claim.destination_failures),
            )
        async with gate:
            probe = False
            if destination is not None and failing[destination]:
                if not await self._take_probe(claim, state, destination, failing):
                    return
                probe = failing[destination]
            adapter = ADAPTERS[claim.channel]
            ctx = DeliveryContext(
                delivery_id=claim.id,
                secret=claim.secret,
                template=claim.template,
                settings=self.services.settings,
                http=http,
                timeout=self.options.timeout,
                resolver=self.resolver,
            )
            async with sends:
                started_at, started = state.now(), time.monotonic()
                result = await adapter.deliver(claim.target, claim.payload, ctx)
                duration_ms = round((time.monotonic() - started) * 1000)
            await self._record(claim, result, state, started_at, duration_ms, failing, probe)

    async def _take_probe(
        self, claim: Claim, state: _Pass, destination: str, failing: dict[str, bool]
    ) -> bool:
        """Whether this delivery is its failing destination's probe; if not, push it back."""
        async with self.services.db.connection() as conn:
            if await outbox.take_probe(conn, destination, now=state.now()) is not None:
                state.stats["probes"] += 1
                return True
            is_failing, _ = await outbox.probe_window_end(conn, destination)
            if not is_failing:
                # Restored meanwhile (another worker's probe succeeded): send normally.
                failing[destination] = False
                return True
            # Parked: the probe's success releases it at once; if no probe ever succeeds it
            # comes back after the longest backoff, like any retry.
            await outbox.release(
                conn,
                claim,
                now=state.now(),
                throttled=True,
                next_attempt_at=state.now() + timedelta(seconds=MAX_DELAY),
                detail="destination_failing",
            )
        state.stats["throttled"] += 1
        return False

    async def _record(
        self,
        claim: Claim,
        result: Result,
        state: _Pass,
        started_at: datetime,
        duration_ms: int,
        failing: dict[str, bool],
        probe: bool,
    ) -> None:
        now = state.now()
        destination = claim.destination_id
        counts = (
            destination is not None
            and not result.ok
            and result.skip_reason is None
            and result.error_class not in _NOT_THE_DESTINATION
        )
        window_end: datetime | None = None
        if counts and probe:
            # A failed probe opens the next window first: the probe is due when it ends.
            window_end = await self._count_failure(destination, now, probe, failing)
        outcome = decide(
            result,
            claim,
            now,
            rng=self._rng,
            started_at=started_at,
            duration_ms=duration_ms,
            probe_window_end=window_end,
        )
        won = await state.outcomes.write(outcome)
        status, reason = outcome.status, outcome.reason
        if won and status == "dead":
            async with self.services.db.connection() as conn:
                await self._alert(conn, claim, reason, now)
                if probe and window_end is not None:
                    assert destination is not None
                    await outbox.promote_parked(conn, destination, at=window_end, now=now)
        ids = {**claim.log_ids, "detail": {"status": status, "result": result.summary}}
        if not won:
            state.stats["fenced"] += 1
            log.warning("late answer of an expired claim ignored", extra=ids)
            return
        state.stats[status] += 1
        log.info("delivery attempt", extra=ids)
        if counts and not probe:
            # Counted only once the outcome is ours: a fenced late answer changes nothing.
            await self._count_failure(destination, now, probe, failing)
        dirty = state.dirty
        if counts:
            assert destination is not None
            dirty[destination] = True
        if destination is not None and result.ok and dirty.get(destination, True):
            async with self.services.db.connection() as conn:
                released = await outbox.destination_succeeded(conn, destination, now=now)
            failing[destination] = False
            # Known healthy with no failures since: later successes need not write.
            dirty[destination] = False
            state.stats["unthrottled"] += released

    async def _count_failure(
        self, destination: str | None, now: datetime, probe: bool, failing: dict[str, bool]
    ) -> datetime | None:
        assert destination is not None
        async with self.services.db.connection() as conn:
            is_failing, window_end = await outbox.destination_failed(
                conn, destination, now=now, probe=probe
            )
        failing[destination] = is_failing
        return window_end

    async def _alert(self, conn: Any, claim: Claim, reason: str | None, now: datetime) -> None:
        # One open alert per destination (per form for acknowledgement emails).
        await raise_alert(
            conn,
            organization_id=claim.organization_id,
            kind="delivery.dead",
            subject_id=claim.destination_id or claim.form_id or claim.id,
            detail=f"{claim.id}: {reason}",
            delivery_id=claim.id,
            now=now,
        )


async def deliver_pass(services: Services, now: datetime, budget: float) -> Mapping[str, Any]:
    """The `deliver` tick: one pass that never outlives its budget."""
    return await Deliverer(services, options=WorkerOptions(strict_budget=True)).run_pass(
        now=now, budget=budget
    )
