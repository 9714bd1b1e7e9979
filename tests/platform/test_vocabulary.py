"""Each enumerated word of the code against the CHECK constraint of the column that stores it.

Adding a value on one side only (a migration, or `core/platform/vocabulary.py`) fails here.
"""

from __future__ import annotations

import re
from typing import Any, get_args

import pytest

from core.owner.plans import PlanName
from core.platform.db import Conn
from core.platform.vocabulary import (
    ActorKind,
    AlertKind,
    AlertStatus,
    AttemptOutcome,
    AuditActorKind,
    AuditVia,
    AuthFailureKind,
    DeliveryKind,
    DeliveryStatus,
    DestinationHealth,
    DigestPeriod,
    EmailSenderProvider,
    EraseReason,
    HookEndReason,
    HookEvent,
    MemberLinkKind,
    NotificationKind,
    PausedReason,
    Role,
    RouteMode,
    SchemaMode,
    SchemaSource,
    SmtpTls,
    StreamEventReason,
    StreamEventStatus,
    SubmissionFlag,
    SubmissionReason,
    SubmissionStatus,
    SuppressionReason,
    TickName,
    TrainingLabel,
    WeeklyTable,
)

# (table, column, its words in the code)
COLUMNS: list[tuple[str, str, Any]] = [
    ("organizations", "plan", PlanName),
    ("forms", "schema_mode", SchemaMode),
    ("form_schemas", "source", SchemaSource),
    ("destinations", "health", DestinationHealth),
    ("destinations", "paused_reason", PausedReason),
    ("notifications", "kind", NotificationKind),
    ("routes", "include_statuses", SubmissionStatus),
    ("routes", "mode", RouteMode),
    ("routes", "period", DigestPeriod),
    ("submissions", "status", SubmissionStatus),
    ("submissions", "reason", SubmissionReason),
    ("submissions", "flags", SubmissionFlag),
    ("submissions", "erase_reason", EraseReason),
    ("deliveries", "kind", DeliveryKind),
    ("hooks", "event", HookEvent),
    ("hooks", "deleted_reason", HookEndReason),
    ("deliveries", "status", DeliveryStatus),
    ("delivery_attempts", "outcome", AttemptOutcome),
    ("history_partitions", "parent", WeeklyTable),
    ("alerts", "kind", AlertKind),
    ("alerts", "status", AlertStatus),
    ("worker_heartbeats", "tick", TickName),
    ("auth_failures", "kind", AuthFailureKind),
    ("streams", "schema_mode", SchemaMode),
    ("stream_schemas", "source", SchemaSource),
    ("stream_events", "status", StreamEventStatus),
    ("stream_events", "reason", StreamEventReason),
    ("stream_events", "erase_reason", EraseReason),
    ("stream_routes", "include_statuses", StreamEventStatus),
    ("spam_training", "label", TrainingLabel),
    ("api_keys", "role", Role),
    ("audit_log", "actor_kind", AuditActorKind),
    ("audit_log", "via", AuditVia),
    ("memberships", "role", Role),
    ("invitations", "role", Role),
    ("organization_sso", "default_role", Role),
    ("invitations", "sender_kind", ActorKind),
    ("member_links", "kind", MemberLinkKind),
    ("email_suppressions", "reason", SuppressionReason),
    ("organization_email", "provider", EmailSenderProvider),
    ("organization_email", "smtp_tls", SmtpTls),
]
# A column's values are listed by its own CHECK (`<table>_<column>_check`, as Postgres
# names it), except a submission's reason: with the status it goes with.
CONSTRAINTS = {
    ("submissions", "reason"): "submissions_reason_matches_status",
    ("stream_events", "reason"): "stream_events_reason_matches_status",
}

_LITERAL = re.compile(r"'([^']*)'::text")


def _values(definition: str, column: str) -> set[str]:
    """The quoted values `definition` (as `pg_get_constraintdef` writes it) allows `column`:
    `= ANY (ARRAY[...])`, `<@ ARRAY[...]`, `= '...'` and `IS DISTINCT FROM '...'`."""
    name = re.escape(column)
    lists = re.findall(rf"\b{name} (?:= ANY \(|<@ )ARRAY\[([^\]]*)\]", definition)
    singles = re.findall(rf"\b{name} (?:=|IS DISTINCT FROM) ('[^']*'::text)", definition)
    return {value for text in [*lists, *singles] for value in _LITERAL.findall(text)}


async def _definitions(conn: Conn) -> dict[tuple[str, str], str]:
    """Every CHECK constraint's definition, by (table, constraint name)."""
    cur = await conn.execute(
        """SELECT conrelid::regclass::text AS table_name, conname,
                  pg_get_constraintdef(pg_constraint.oid) AS definition
             FROM pg_constraint
             JOIN pg_class c ON c.oid = conrelid
            WHERE contype = 'c' AND connamespace = 'public'::regnamespace
              AND NOT c.relispartition"""
    )
    return {(row["table_name"], row["conname"]): row["definition"] for row in await cur.fetchall()}


@pytest.mark.parametrize(
    ("table", "column", "words"), COLUMNS, ids=[f"{table}.{column}" for table, column, _ in COLUMNS]
)
async def test_vocabulary__matches_the_column_check(
    conn: Conn, table: str, column: str, words: Any
) -> None:
    constraint = CONSTRAINTS.get((table, column), f"{table}_{column}_check")
    definition = (await _definitions(conn)).get((table, constraint))
    assert definition is not None, f"{table}.{column}: no constraint {constraint} on {table}"
    database = _values(definition, column)
    python = set(get_args(words))
    assert database, f"{table}.{column}: {constraint} lists no values of {column}"
    sides = [
        f"{side}: {sorted(values)}"
        for side, values in (
            (f"only in the database ({constraint})", database - python),
            ("only in the code", python - database),
        )
        if values
    ]
    assert not sides, f"{table}.{column} differs, " + "; ".join(sides)


async def test_vocabulary__every_enumerated_column_has_words(conn: Conn) -> None:
    enumerated = {
        (table, column)
        for (table, _), definition in (await _definitions(conn)).items()
        for column in re.findall(r"\b(\w+) (?:= ANY \(|<@ )ARRAY\[", definition)
    }
    missing = enumerated - {(table, column) for table, column, _ in COLUMNS}
    assert not missing, f"enumerated columns with no words in the code: {sorted(missing)}"


@pytest.mark.parametrize(
    ("definition", "column", "values"),
    [
        pytest.param(
            "CHECK ((mode = ANY (ARRAY['immediate'::text, 'digest'::text])))",
            "mode",
            {"immediate", "digest"},
            id="in",
        ),
        pytest.param(
            "CHECK ((flags <@ ARRAY['test'::text, 'over_quota'::text]))",
            "flags",
            {"test", "over_quota"},
            id="contained-in",
        ),
        pytest.param(
            "CHECK (((status = 'spam'::text) AND "
            "(NOT (reason IS DISTINCT FROM 'honeypot'::text))))",
            "reason",
            {"honeypot"},
            id="another-column-beside",
        ),
        pytest.param(
            "CHECK (((status <> 'sending'::text) OR (claim_token IS NOT NULL)))",
            "status",
            set(),
            id="not-equal",
        ),
        pytest.param(
            "CHECK ((erase_reason = ANY (ARRAY['expired'::text])))",
            "reason",
            set(),
            id="column-name-inside-another",
        ),
    ],
)
def test_vocabulary__values_of_a_constraint(definition: str, column: str, values: set[str]) -> None:
    assert _values(definition, column) == values
