"""The plan table: the one place that says what each plan allows (docs/api.md#usage)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

PlanName = Literal["free", "pro", "team", "self_hosted"]
PLAN_NAMES: tuple[str, ...] = get_args(PlanName)

MIB = 1024 * 1024
GIB = 1024 * MIB

# Spam and quarantined submissions are kept this long on every plan (a form's shorter
# retention wins), like the spam folders of Basin and Formspree.
SPAM_RETENTION_DAYS = 30
AUDIT_RETENTION_DAYS = 365


@dataclass(frozen=True, slots=True)
class Plan:
    """Limits of one plan; `None` means unlimited."""

    name: str
    max_forms: int | None
    max_destinations: int | None
    monthly_submissions: int | None
    retention_days: int | None
    max_api_keys: int | None
    max_schema_versions: int | None
    monthly_attachment_bytes: int | None
    max_streams: int | None
    monthly_events: int | None
    # The bytes of values a month may keep for review rather than accepted within the quota:
    # spam, quarantined and over-quota submissions (docs/submit.md#floods).
    monthly_review_bytes: int | None
    spam_retention_days: int = SPAM_RETENTION_DAYS
    # Days the audit trail keeps its rows before the retention tick forgets the oldest
    # (docs/teams.md#retention); at least a year on every plan.
    audit_retention_days: int = AUDIT_RETENTION_DAYS

    def retention_for(self, status: str, form_days: int | None) -> int | None:
        """Days a submission of `status` keeps its values: the form's retention or the
        plan's, and never more than the spam retention for `spam` and `quarantined`."""
        days = form_days if form_days is not None else self.retention_days
        if status == "accepted":
            return days
        return self.spam_retention_days if days is None else min(days, self.spam_retention_days)


PLANS: dict[str, Plan] = {
    "free": Plan(
        "free",
        max_forms=3,
        max_destinations=3,
        monthly_submissions=100,
        retention_days=90,
        max_api_keys=5,
        max_schema_versions=20,
        monthly_attachment_bytes=100 * MIB,
        max_streams=1,
        monthly_events=1_000,
        monthly_review_bytes=10 * MIB,
    ),
    "pro": Plan(
        "pro",
        max_forms=50,
        max_destinations=50,
        monthly_submissions=10_000,
        retention_days=365,
        max_api_keys=25,
        max_schema_versions=100,
        monthly_attachment_bytes=10 * GIB,
        max_streams=20,
        monthly_events=100_000,
        monthly_review_bytes=1 * GIB,
    ),
    "team": Plan(
        "team",
        max_forms=500,
        max_destinations=500,
        monthly_submissions=100_000,
        retention_days=730,
        max_api_keys=100,
        max_schema_versions=500,
        monthly_attachment_bytes=100 * GIB,
        max_streams=200,
        monthly_events=1_000_000,
        monthly_review_bytes=10 * GIB,
        audit_retention_days=730,
    ),
    # The operator owns the machine; only the schema versions an `observe` form can be made
    # to infer stay bounded.
    "self_hosted": Plan(
        "self_hosted",
        max_forms=None,
        max_destinations=None,
        monthly_submissions=None,
        retention_days=None,
        max_api_keys=None,
        max_schema_versions=1_000,
        monthly_attachment_bytes=None,
        max_streams=None,
        monthly_events=None,
        monthly_review_bytes=None,
        audit_retention_days=730,
    ),
}


def default_plan(*, hosted: bool) -> PlanName:
    """The plan a new organization starts on when none is named: `free` on the hosted
    service (`POSTBAG_HOSTED=true`), `self_hosted` on every other installation."""
    return "free" if hosted else "self_hosted"
