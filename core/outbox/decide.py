"""What a send's result makes of its delivery (docs/delivery.md): the outcome the completer writes.

Pure, like the backoff rules it applies: time and randomness are passed in.
"""

from __future__ import annotations

import random
from datetime import datetime

from core.destinations.base import Result
from core.outbox.backoff import next_attempt_at
from core.outbox.store import Attempt, Claim, Outcome


def decide(
    result: Result,
    claim: Claim,
    now: datetime,
    *,
    rng: random.Random,
    started_at: datetime,
    duration_ms: int,
    probe_window_end: datetime | None = None,
) -> Outcome:
    """The outcome of `claim`'s send that began at `started_at` and gave `result` at `now`.

    `probe_window_end` is the end of the window a failed probe opened (None for any other
    send): the next probe is not due before it.
    """
    attempts = claim.attempts + 1
    due: datetime | None = None
    reason: str | None = None
    attempt: Attempt | None = Attempt(
        started_at, duration_ms, result.http_status, result.error_class, result.excerpt
    )
    if result.skip_reason is not None:
        status, reason, attempt = "skipped", result.skip_reason, None
    elif result.ok:
        status = "sent"
    elif result.retryable and attempts < claim.max_attempts:
        status = "failed"
        due = next_attempt_at(now, attempts, result.retry_after, rng=rng)
        if probe_window_end is not None:
            # A failed probe is the next one: due when the new window ends.
            due = max(due, probe_window_end)
    elif result.retryable:
        status, reason = "dead", "attempts_exhausted"
    else:
        status, reason = "dead", result.summary
    detail = result.summary if reason is None else reason
    if reason == "attempts_exhausted":
        detail = f"attempts_exhausted (last: {result.summary})"
    event = f"delivery.{status}" if status in ("sent", "dead") else None
    event_data = {
        "delivery": claim.id,
        "submission": claim.submission_id,
        "destination": claim.destination_id,
        **({"reason": reason} if reason else {}),
    }
    return Outcome(
        claim,
        now,
        status,
        reason,
        detail,
        next_attempt_at=due,
        attempt=attempt,
        event=event,
        event_data=event_data,
    )
