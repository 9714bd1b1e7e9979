"""The executor of a pass: one claim from its live checks to its written outcome (docs/delivery.md).

A destination that paused itself first (its deliveries wait: core/outbox/pauses.py), the
live skip check, the attempt limit (attempts cut short by a crash count), the quota
hold, the per-destination gate, the breaker's say on a failing destination, the adapter's
send (an exception is a failed attempt, never an orphaned claim), then `decide`, the
completer, the destination's adaptive limit and, after a 429, its lowered rate.
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from typing import TYPE_CHECKING

from core.destinations.base import DeliveryContext, Result
from core.destinations.registry import ADAPTERS
from core.outbox import limits, pauses, rates, store
from core.outbox.breaker import counts_against
from core.outbox.decide import decide
from core.outbox.store import Claim
from core.owner import hooks
from core.owner.email_senders import sender_settings, senders_for
from core.platform.logs import log
from core.platform.queries import queries
from core.platform.settings import Settings
from core.platform.vocabulary import DeliverySkipReason

if TYPE_CHECKING:
    from core.outbox.passes import PassState


def skip_reason(claim: Claim, now: datetime) -> str | None:
    """The live check before a send: why this delivery must not go out, if it must not."""
    if claim.submission_id is not None or claim.event_id is not None:
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


async def execute(claim: Claim, state: PassState) -> None:
    """Run `claim` to its outcome; a failure is logged and counted, never raised."""
    try:
        await _deliver(claim, state)
    except Exception:
        # Only the database can fail here (an adapter's exception is a failed attempt): the
        # claim stays `sending` until its lease expires, and the attempt it spent counts.
        state.stats["errors"] += 1
        log.exception("delivery handling failed", extra=claim.log_ids)


async def _send(claim: Claim, ctx: DeliveryContext) -> Result:
    """The adapter's send; an exception in it (a bug, a value it cannot render) is a failed,
    retryable attempt with the error class `adapter_error` and the exception's type."""
    try:
        return await ADAPTERS[claim.channel].deliver(claim.target, claim.payload, ctx)
    except Exception as exc:
        # The message may quote the values: only the type is kept.
        log.error(
            "adapter raised",
            extra={**claim.log_ids, "detail": {"exception": type(exc).__name__}},
        )
        return Result(
            ok=False, retryable=True, error_class="adapter_error", excerpt=type(exc).__name__
        )


async def _exhausted(claim: Claim, state: PassState) -> None:
    """A claim whose attempts were all spent by sends cut short (a crash, a lost lease):
    `dead` without another send, with its event, alert and hooks' deliveries (written with
    the outcome: `store.finish`)."""
    now = state.now()
    reason = "attempts_exhausted"
    outcome = store.Outcome(
        claim,
        now,
        "dead",
        reason,
        f"{reason} (last: interrupted)",
        event="delivery.dead",
        event_data={
            "delivery": claim.id,
            "submission": claim.submission_id,
            "destination": claim.destination_id,
            "reason": reason,
        },
    )
    if await state.completer.write(outcome):
        state.stats["dead"] += 1
        log.info("delivery dead: its attempts were cut short", extra=claim.log_ids)


async def _deliver(claim: Claim, state: PassState) -> None:
    if pauses.waits(claim):
        # Before the attempt limit too: a claim that crashed on its last attempt waits.
        await pauses.park(claim, state)
        return
    reason = skip_reason(claim, state.now()) or await _suppressed(claim, state)
    if reason is not None:
        await state.completer.write(store.Outcome(claim, state.now(), "skipped", reason, reason))
        state.stats["skipped"] += 1
        log.info("delivery skipped", extra={**claim.log_ids, "detail": {"reason": reason}})
        return
    if claim.attempts >= claim.max_attempts:
        await _exhausted(claim, state)
        return
    if claim.over_quota:
        async with state.services.db.connection() as conn:
            await store.release(conn, claim, now=state.now(), held=True, detail="over_quota")
        state.stats["held"] += 1
        return
    destination = claim.destination_id
    breaker = state.breaker
    gate = asyncio.Semaphore(1_000_000)
    if destination is not None:
        gate = state.gates.setdefault(destination, asyncio.Semaphore(state.options.per_destination))
        breaker.learn(destination, claim)
    async with gate:
        probe = False
        if destination is not None and breaker.failing(destination):
            if not await breaker.take_probe(claim, destination):
                return
            probe = breaker.failing(destination)
        ctx = DeliveryContext(
            delivery_id=claim.id,
            secret=claim.secret,
            template=claim.template,
            settings=await _email_settings(claim, state),
            http=state.http,
            timeout=state.options.timeout,
            resolver=state.resolver,
        )
        async with state.sends:
            state.started.add(claim.id)
            started_at, started = state.now(), time.monotonic()
            result = await _send(claim, ctx)
            duration_ms = round((time.monotonic() - started) * 1000)
        if destination is not None and (result.ok or counts_against(result)):
            # An answer (or its absence) from the destination: its latency sets its limit,
            # before the outcome frees this send's room for the next claim.
            opts = state.options
            await limits.adapt(
                state.services.db,
                destination,
                claim.destination_send_limit,
                latency=duration_ms / 1000,
                ceiling=opts.per_destination,
                slow_send=opts.slow_send,
            )
        await _record(
            claim, result, state, started_at=started_at, duration_ms=duration_ms, probe=probe
        )


async def _suppressed(claim: Claim, state: PassState) -> DeliverySkipReason | None:
    """`suppressed` for an autoresponse whose mailbox joined the suppression list since it
    was planned (docs/autoresponse.md#the-suppression-list)."""
    hashed = (claim.template or {}).get("unsubscribe") if claim.kind == "autoresponse" else None
    if not isinstance(hashed, str):
        return None
    row = await state.services.db.fetch_one(
        queries["is_suppressed"], {"hash": bytes.fromhex(hashed)}
    )
    return "suppressed" if row is not None and row["suppressed"] else None


async def _email_settings(claim: Claim, state: PassState) -> Settings:
    """The settings a claim sends with: for an organization's email (its destinations',
    notices, acknowledgements, autoresponses; an account email is the installation's) its
    own sender when it set one (core/owner/email_senders.py), else the installation's."""
    settings = state.services.settings
    if not ADAPTERS[claim.channel].sends_email or claim.kind == "account":
        return settings
    org = claim.organization_id
    if org not in state.email_settings:
        own = await senders_for(state.services.db, [org])
        state.email_settings[org] = sender_settings(settings, own[org]) if org in own else settings
    return state.email_settings[org]


async def _record(
    claim: Claim,
    result: Result,
    state: PassState,
    *,
    started_at: datetime,
    duration_ms: int,
    probe: bool,
) -> None:
    now = state.now()
    breaker = state.breaker
    if claim.destination_id is not None and result.http_status == 429:
        # The service asks for fewer sends: its rate is lowered for every worker.
        await rates.lower(
            state.services.db,
            claim.destination_id,
            now=now,
            started_at=started_at,
            retry_after=result.retry_after,
        )
    # The destination this failure counts against, if it is one that counts.
    blamed = claim.destination_id if counts_against(result) else None
    window_end: datetime | None = None
    if blamed is not None and probe:
        # A failed probe opens the next window first: the probe is due when it ends.
        window_end = await breaker.probe_failed(blamed, now=now)
    outcome = decide(
        result,
        claim,
        now,
        rng=state.rng,
        started_at=started_at,
        duration_ms=duration_ms,
        probe_window_end=window_end,
    )
    won = await state.completer.write(outcome)
    if won and outcome.status == "dead":
        if claim.destination_id is not None and result.http_status == 410:
            # Zapier's contract: a target that is gone unsubscribes its hook (a destination
            # that is no hook's just ends dead).
            await hooks.unsubscribe_gone(
                state.services.db,
                organization_id=claim.organization_id,
                destination_id=claim.destination_id,
                now=now,
            )
        if blamed is not None and window_end is not None:
            await breaker.promote_next_probe(blamed, at=window_end, now=now)
    ids = {**claim.log_ids, "detail": {"status": outcome.status, "result": result.summary}}
    if not won:
        state.stats["fenced"] += 1
        log.warning("late answer of an expired claim ignored", extra=ids)
        return
    state.stats[outcome.status] += 1
    log.info("delivery attempt", extra=ids)
    if blamed is not None:
        # Counted only once the outcome is ours: a fenced late answer changes nothing.
        await breaker.failed(blamed, now=now, probe=probe)
    elif claim.destination_id is not None and result.ok:
        await breaker.succeeded(claim.destination_id, now=now)
