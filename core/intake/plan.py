"""The submit transaction's plan: everything `insert_submission` stores, worked out from the
form, the checks' decision and the request, without touching the database (docs/submit.md).

The plan carries two variants: the one the checks decided, and the rate-limited one the
statement stores instead when it counts the client over the limit under its lock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from psycopg.types.json import Jsonb

from core.intake.checks import Decision
from core.intake.form import Form
from core.intake.payload import (
    acknowledgement,
    autoresponse,
    form_snapshot,
    request_meta,
    route_deliveries,
    submission_events,
)
from core.intake.visitor import recipient_hash
from core.owner.plans import PLANS
from core.platform.clock import month_of, next_month

ACK_DAILY_MAX = 5  # acknowledgement emails per recipient address and UTC day (docs/submit.md)
# Autoresponses per recipient mailbox and UTC day: from one organization, and from the whole
# installation (docs/autoresponse.md#abuse-bounds).
AUTORESPONSE_ORGANIZATION_DAILY_MAX = 3
AUTORESPONSE_INSTALLATION_DAILY_MAX = 10
# Past this multiple of a form's rate limit within its window, a client's posts are refused
# (`429 too_many_submissions`) and store nothing (docs/submit.md#floods).
FLOOD_MULTIPLE = 2
# The reasons decided before the rate limit (docs/submit.md: the checks' order).
_BEFORE_RATE_LIMIT = frozenset({"honeypot", "origin_rejected", "rate_limited"})
RATE_LIMITED = Decision("quarantined", "rate_limited")
# What the statement stores instead when it counts one of the post's fingerprints over the
# form's `duplicate_max` (docs/spam.md#duplicates).
DUPLICATE = Decision("spam", "duplicate_content")


@dataclass(frozen=True, slots=True)
class Submitted:
    """What the visitor sent, as the submit path read it."""

    submission_id: str
    values: Mapping[str, Any]
    test: bool
    idempotency_key: str | None
    payload_hash: bytes
    attachments: list[dict[str, Any]]
    origin: str | None
    referrer: str | None
    accept_language: str | None


def quota_flags(form: Form, decision: Decision, *, test: bool) -> tuple[list[str], bool]:
    """The submission's flags, and whether it is over the month's quota (deliveries held)."""
    quota = PLANS[form.plan].monthly_submissions
    over_quota = (
        decision.status == "accepted"
        and not test
        and quota is not None
        and form.month_submissions >= quota
    )
    return (["test"] if test else []) + (["over_quota"] if over_quota else []), over_quota


def _distinct(drift: list[dict[str, str]]) -> list[dict[str, str]]:
    seen = {(d["path"], d["keyword"]) for d in drift}
    return [{"path": path, "keyword": keyword} for path, keyword in sorted(seen)]


def insert_params(
    form: Form,
    decision: Decision,
    submitted: Submitted,
    *,
    secret_key: bytes,
    now: datetime,
) -> dict[str, Any]:
    """The parameters of `insert_submission` for this submission."""
    plan = PLANS[form.plan]
    values = submitted.values
    flags, over_quota = quota_flags(form, decision, test=submitted.test)
    limited_flags = ["test"] if submitted.test else []
    meta = request_meta(
        origin=submitted.origin,
        referrer=submitted.referrer,
        accept_language=submitted.accept_language,
    )
    ack = acknowledgement(form, values, decision.status)
    spam = form.spam
    ham_due = (
        now + timedelta(hours=spam.implicit_ham_hours)
        if spam.implicit_ham and decision.status == "accepted" and not submitted.test
        else None
    )
    counted_prints = bool(decision.fingerprints) and spam.duplicate_max is not None
    reply = autoresponse(form, values, decision.status, over_quota=over_quota)
    reply_hash = recipient_hash(str(reply["target"]["to"][0]), secret_key) if reply else None
    if reply is not None and reply_hash is not None:
        # The mailbox's hash names it in the unsubscribe link the worker signs.
        reply["template"]["unsubscribe"] = reply_hash.hex()
    return {
        "id": submitted.submission_id,
        "organization_id": form.organization_id,
        "form_id": form.id,
        "status": decision.status,
        "reason": decision.reason,
        "flags": flags,
        "values": Jsonb(values),
        "field_order": list(values),
        "meta": Jsonb(meta),
        "idempotency_key": submitted.idempotency_key,
        "payload_hash": submitted.payload_hash,
        "client_hash": form.client_hash,
        "schema_version": form.schema_version if form.schema_mode != "off" else None,
        "schema_mode": form.schema_mode,
        "drift": Jsonb(_distinct(decision.drift)),
        "now": now,
        "retention_days": plan.retention_for(decision.status, form.retention_days),
        "limited_retention_days": plan.retention_for(RATE_LIMITED.status, form.retention_days),
        "attachments": Jsonb(submitted.attachments),
        "held": over_quota,
        "form_snapshot": Jsonb(
            form_snapshot(
                form_name=form.name,
                labels=form.labels,
                consent_field=form.consent_field,
                ack_email=form.ack_email,
                values=values,
                attachments=submitted.attachments,
            )
        ),
        "deliveries": Jsonb(route_deliveries(form, decision.status)),
        "acknowledgements": Jsonb([ack] if ack else []),
        "ack_recipient_hash": (
            recipient_hash(str(ack["target"]["to"][0]), secret_key) if ack else None
        ),
        "ack_daily_max": ACK_DAILY_MAX,
        "autoresponses": Jsonb([reply] if reply else []),
        "ar_recipient_hash": reply_hash,
        "ar_organization_max": AUTORESPONSE_ORGANIZATION_DAILY_MAX,
        "ar_installation_max": AUTORESPONSE_INSTALLATION_DAILY_MAX,
        "today": now.astimezone(UTC).date(),
        "events": Jsonb(submission_events(form, decision, flags)),
        "month": month_of(now),
        "counted": decision.status == "accepted" and not submitted.test,
        # Past the rate check, the statement counts again under its lock and may store the
        # rate-limited variant instead.
        "rate_checked": decision.reason not in _BEFORE_RATE_LIMIT,
        "form_revision": form.revision if form.kept else None,
        "quota": plan.monthly_submissions,
        "rate_limit_max": form.rate_limit_max,
        "flood_max": FLOOD_MULTIPLE * form.rate_limit_max,
        # Kept for review rather than accepted within the quota: its values' bytes count
        # against the plan's monthly review bytes (the rate-limited variant always does).
        "for_review": decision.status != "accepted" or over_quota,
        "review_bytes_max": plan.monthly_review_bytes,
        "next_month": next_month(now),
        "rate_limit_seconds": form.rate_limit_per_seconds,
        "limited_flags": limited_flags,
        "limited_deliveries": Jsonb(route_deliveries(form, RATE_LIMITED.status)),
        "limited_events": Jsonb(submission_events(form, RATE_LIMITED, limited_flags)),
        # The spam checks' parts: the learned score, when implicit ham is due
        # (docs/spam.md#implicit-ham), and the fingerprints the statement counts with the
        # duplicate variant it stores instead (its flags are `limited_flags`).
        "spam_score": decision.spam_score,
        "ham_due_at": ham_due,
        "fingerprints": list(decision.fingerprints) if counted_prints else [],
        "duplicate_max": spam.duplicate_max,
        "duplicate_window": spam.duplicate_window_seconds,
        "duplicate_retention_days": plan.retention_for(DUPLICATE.status, form.retention_days),
        "duplicate_deliveries": Jsonb(
            route_deliveries(form, DUPLICATE.status) if counted_prints else []
        ),
        "duplicate_events": Jsonb(
            submission_events(form, DUPLICATE, limited_flags) if counted_prints else []
        ),
    }


def unused_parts(params: Mapping[str, Any]) -> frozenset[str]:
    """The optional parts of `insert_submission` these parameters give nothing to write:
    the statement runs without them (each costs the server its tables' locks and a plan
    node even when it inserts no row)."""
    empty = {
        "keyed": params["idempotency_key"] is None,
        "ham": params["ham_due_at"] is None,
        "attachments": not params["attachments"].obj,
        # An acknowledgement is written only under its address's daily cap.
        "acknowledgement": not params["acknowledgements"].obj
        or params["ack_recipient_hash"] is None,
        "autoresponse": not params["autoresponses"].obj,
        "drift": not params["drift"].obj,
    }
    return frozenset(part for part, unused in empty.items() if unused)
