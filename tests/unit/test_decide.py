from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from uuid import UUID

from core.destinations.base import Result
from core.outbox.backoff import MAX_DELAY
from core.outbox.decide import decide
from core.outbox.store import Attempt, Claim, Outcome

NOW = datetime(2026, 10, 13, 9, 30, tzinfo=UTC)
STARTED = NOW - timedelta(milliseconds=120)
CLAIM = Claim(
    id="dlv_1",
    organization_id="org_1",
    kind="destination",
    submission_id="sub_1",
    destination_id="dst_1",
    form_id="frm_1",
    channel="webhook",
    attempts=0,
    max_attempts=3,
    claim_token=UUID(int=1),
    payload={},
    target={"url": "https://example.com/hook"},
    template=None,
    secret=None,
    erased_at=None,
    erase_at=None,
    destination_deleted_at=None,
    destination_enabled=True,
    destination_paused_reason=None,
    destination_health="healthy",
    destination_probe_after=None,
    destination_failures=0,
    destination_send_limit=None,
    over_quota=False,
)


def _decide(
    result: Result, claim: Claim = CLAIM, *, probe_window_end: datetime | None = None
) -> Outcome:
    return decide(
        result,
        claim,
        NOW,
        rng=random.Random(7),
        started_at=STARTED,
        duration_ms=120,
        probe_window_end=probe_window_end,
    )


def test_decide__sent() -> None:
    outcome = _decide(Result(ok=True, http_status=204))
    assert outcome.status == "sent"
    assert outcome.reason is None
    assert outcome.detail == "sent (HTTP 204)"
    assert outcome.next_attempt_at is None
    assert outcome.attempt == Attempt(STARTED, 120, 204, None, None)
    assert outcome.event == "delivery.sent"
    assert outcome.event_data == {
        "delivery": "dlv_1",
        "submission": "sub_1",
        "destination": "dst_1",
    }


def test_decide__retryable_under_the_limit_waits_as_retry_after_asks() -> None:
    outcome = _decide(Result(ok=False, retryable=True, http_status=503, retry_after=3600))
    assert outcome.status == "failed"
    assert outcome.reason is None
    assert outcome.detail == "http_503"
    assert outcome.next_attempt_at == NOW + timedelta(seconds=3600)
    assert outcome.attempt == Attempt(STARTED, 120, 503, None, None)
    assert outcome.event is None


def test_decide__retryable_at_the_limit_is_dead_with_the_last_answer() -> None:
    claim = replace(CLAIM, attempts=2)
    outcome = _decide(Result(ok=False, retryable=True, error_class="timeout"), claim)
    assert outcome.status == "dead"
    assert outcome.reason == "attempts_exhausted"
    assert outcome.detail == "attempts_exhausted (last: timeout)"
    assert outcome.next_attempt_at is None
    assert outcome.attempt == Attempt(STARTED, 120, None, "timeout", None)
    assert outcome.event == "delivery.dead"
    assert outcome.event_data == {
        "delivery": "dlv_1",
        "submission": "sub_1",
        "destination": "dst_1",
        "reason": "attempts_exhausted",
    }


def test_decide__non_retryable_is_dead_at_once() -> None:
    outcome = _decide(Result(ok=False, http_status=410, excerpt="gone"))
    assert outcome.status == "dead"
    assert outcome.reason == "http_410"
    assert outcome.detail == "http_410"
    assert outcome.next_attempt_at is None
    assert outcome.attempt == Attempt(STARTED, 120, 410, None, "gone")
    assert outcome.event == "delivery.dead"
    assert outcome.event_data is not None
    assert outcome.event_data["reason"] == "http_410"


def test_decide__skip_reason_is_skipped_without_an_attempt() -> None:
    outcome = _decide(Result(ok=False, skip_reason="email_log_only"))
    assert outcome.status == "skipped"
    assert outcome.reason == "email_log_only"
    assert outcome.detail == "email_log_only"
    assert outcome.attempt is None
    assert outcome.next_attempt_at is None
    assert outcome.event is None


def test_decide__failed_probe_due_when_its_window_ends() -> None:
    window_end = NOW + timedelta(hours=1)
    failed = Result(ok=False, retryable=True, http_status=502)
    outcome = _decide(failed, probe_window_end=window_end)
    assert outcome.status == "failed"
    assert outcome.next_attempt_at == window_end


def test_decide__failed_probe_keeps_a_backoff_longer_than_its_window() -> None:
    window_end = NOW + timedelta(seconds=1)
    failed = Result(ok=False, retryable=True, http_status=502, retry_after=MAX_DELAY)
    outcome = _decide(failed, probe_window_end=window_end)
    assert outcome.next_attempt_at == NOW + timedelta(seconds=MAX_DELAY)
