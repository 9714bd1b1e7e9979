"""The domain's enumerated words, each spelled once, with the column that stores it.

Each is the Python side of a CHECK constraint in `migrations/`; tests/platform/
test_vocabulary.py holds the two against each other. Plan names belong to the plan table
(`core/owner/plans.py`); destination types are the adapter registry's, recorded in the
`destination_types` table.
"""

from __future__ import annotations

from typing import Literal

# submissions.status; routes.include_statuses.
SubmissionStatus = Literal["accepted", "spam", "quarantined"]
# submissions.reason: `honeypot`, `marked_spam` (the owner's mark) and the spam checks'
# reasons (docs/spam.md) go with `spam`, the others with `quarantined`.
SubmissionReason = Literal[
    "honeypot",
    "marked_spam",
    "spam_rule:links",
    "spam_rule:words",
    "spam_rule:patterns",
    "spam_rule:email_domain",
    "spam_rule:disposable_email",
    "spam_rule:script",
    "too_fast",
    "stale_token",
    "forged_token",
    "missing_token",
    "duplicate_content",
    "learned",
    "akismet",
    "origin_rejected",
    "rate_limited",
    "turnstile_failed",
    "turnstile_unavailable",
    "schema_violation",
    "schema_unchecked",
    "schema_error",
    "hcaptcha_failed",
    "hcaptcha_unavailable",
    "recaptcha_failed",
    "recaptcha_unavailable",
    "akismet_unavailable",
    "spam_unchecked",
]
# spam_training.label: how the learned filter was taught a submission (docs/spam.md).
TrainingLabel = Literal["spam", "ham"]
# submissions.flags
SubmissionFlag = Literal["test", "over_quota"]
# submissions.erase_reason: the owner's erase, or retention.
EraseReason = Literal["requested", "expired"]

# A member's or an API key's role in an organization, most powerful first (core/owner/roles.py).
Role = Literal["owner", "admin", "operator", "viewer"]
# Who acted: a member signed in, or an API key.
ActorKind = Literal["member", "key"]
# audit_log.actor_kind: a member, an API key, the operator's `postbag` command line, or the
# system (the delivery worker unsubscribing a hook whose target answered 410).
AuditActorKind = Literal["member", "key", "operator", "system"]
# audit_log.via: the surface an audited action came through.
AuditVia = Literal["api", "mcp", "dashboard", "cli", "worker"]
# member_links.kind: a one-time link's purpose (a sign-in link only `postbag dev` prints).
MemberLinkKind = Literal["password_reset", "sign_in"]

# deliveries.status
DeliveryStatus = Literal["pending", "sending", "sent", "failed", "dead", "skipped"]
# deliveries.kind
DeliveryKind = Literal[
    "submission",
    "acknowledgement",
    "digest",
    "event",
    "notification",
    "account",
    "lifecycle",
    "autoresponse",
]
# deliveries.reason of a `skipped` delivery (no CHECK: a `dead` one's reason is its failure).
DeliverySkipReason = Literal[
    "values_erased",
    "values_expired",
    "destination_paused",
    "destination_removed",
    "email_log_only",
    "submission_spam",
    "autoresponse_limited",
    "suppressed",
]
# organization_email.provider, .smtp_tls: an organization's own email sender.
EmailSenderProvider = Literal["smtp", "resend", "ses"]
SmtpTls = Literal["starttls", "tls"]
# email_suppressions.reason: why no autoresponse goes to a mailbox (docs/autoresponse.md).
SuppressionReason = Literal["unsubscribed", "bounced", "complained"]
# delivery_attempts.outcome: `fenced` when the claim had passed to another worker.
AttemptOutcome = Literal["sent", "failed", "dead", "fenced"]

# history_partitions.parent: the tables kept in weekly partitions (docs/scale.md).
WeeklyTable = Literal["events", "delivery_attempts", "submissions"]

# routes.mode
RouteMode = Literal["immediate", "digest"]
# routes.period
DigestPeriod = Literal["hourly", "daily", "weekly"]

# forms.schema_mode
SchemaMode = Literal["off", "observe", "enforce"]
# form_schemas.source
SchemaSource = Literal["manual", "suggested"]

# stream_events.status; stream_routes.include_statuses.
StreamEventStatus = Literal["accepted", "quarantined"]
# stream_events.reason (with `quarantined`).
StreamEventReason = Literal["schema_violation", "schema_unchecked", "schema_error"]

# destinations.health: the storm breaker's state (failing: only probes are sent).
DestinationHealth = Literal["healthy", "failing"]
# destinations.paused_reason: turned off by its owner, or paused itself (every attempt
# failed for its window).
PausedReason = Literal["owner", "failing"]
# A destination's health as the API and the dashboard say it (core/owner/health.py).
HealthReading = Literal["healthy", "degraded", "failing", "paused"]

# alerts.kind
AlertKind = Literal["delivery.dead", "storage.stuck", "destination.paused"]
# alerts.status
AlertStatus = Literal["open", "acknowledged", "resolved"]

# notifications.kind: what the organization's notification addresses are told.
NotificationKind = Literal["destination.paused", "delivery.dead", "quota.reached"]

# auth_failures.kind: what a throttled client (or account) attempted or failed at.
AuthFailureKind = Literal["sign_in", "sign_in_account", "reset_link", "invitation_link", "api_key"]

# hooks.event: what a REST hook subscribes to (docs/hooks.md).
HookEvent = Literal["submission.created", "stream.event", "delivery.dead", "destination.paused"]
# hooks.deleted_reason: removed by its subscriber, or by its target answering 410 Gone.
HookEndReason = Literal["unsubscribed", "gone"]

# worker_heartbeats.tick
TickName = Literal["deliver", "digest", "retention"]
