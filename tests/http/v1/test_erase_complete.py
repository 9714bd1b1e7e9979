"""Erase is complete: after `POST /v1/submissions/{id}/erase`, or expiry through the
retention tick, no submitted value survives in any column of any table, nor in the logs.

Every text-like column of the schema is classified below: a column added later fails
`test_every_text_column_is_classified` until someone decides whether it can hold values
(then the scenario must put the marker there and the erase must scrub it).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from core.destinations.chat import redact_url
from core.outbox.worker import Deliverer, WorkerOptions
from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.services import Services
from core.ticks.digests import run_digests
from tests.support.api import api_client
from tests.support.builders import (
    Tenant,
    add_schema,
    make_destination,
    make_route,
    make_route_to,
    setup_form,
)
from tests.support.files import pdf
from tests.support.lambdas import FakeContext, invoke, load_event
from tests.support.peers import Peer, Request, receiver, status
from tests.support.records import rows
from tests.support.settings import SENDER, TEST_SECRET_KEY, with_settings
from tests.support.submit import submit_client

MARK = "Zq7Marker"

# Columns a submitted value (or a receiver's echo of one) can reach; the scenario puts the
# marker in each, and erase or expiry must leave none.
VALUE_COLUMNS = {
    ("submissions", "values"): "the values",
    ("submissions", "meta"): "the referrer (a URL may carry values)",
    ("submissions", "field_order"): "the names the visitor posted (a name may carry a value)",
    ("attachments", "name"): "a file's name",
    ("deliveries", "payload"): "a digest's body (it lists several submissions)",
    ("deliveries", "target"): "an acknowledgement's recipient address",
    ("delivery_attempts", "response_excerpt"): "the receiver's answer (it may echo the body)",
}
# Columns a stream event's data can reach (tests/streams/test_fanout.py erases one and finds
# it nowhere, in these or in the deliveries' columns above).
EVENT_VALUE_COLUMNS = {
    ("stream_events", "data"): "the event's data",
    ("stream_events", "schema_errors"): "the drift paths of its data",
}
# Columns that never hold a submitted value, and why.
OTHER_COLUMNS = {
    ("deliveries", "reason"): "a class (http_400, timeout…): a receiver's words stay in attempts",
    ("deliveries", "last_detail"): "a class, as the reason",
    ("events", "data"): "ids, classes and drift paths, never a receiver's words",
    ("alerts", "detail"): "a class, as a delivery's reason",
    ("organizations", "id"): "id",
    ("organizations", "name"): "owner's setting",
    ("organizations", "plan"): "vocabulary",
    ("api_keys", "id"): "id",
    ("api_keys", "organization_id"): "id",
    ("api_keys", "name"): "owner's setting",
    ("api_keys", "prefix"): "key prefix",
    ("api_keys", "key_hash"): "hash",
    ("api_keys", "role"): "vocabulary",
    ("audit_log", "id"): "id",
    ("audit_log", "organization_id"): "id",
    ("audit_log", "actor_kind"): "vocabulary",
    ("audit_log", "actor_id"): "id",
    ("audit_log", "actor_name"): "a key's (a member's) name",
    ("audit_log", "action"): "vocabulary",
    ("audit_log", "subject"): "id",
    ("audit_log", "via"): "vocabulary",
    ("audit_log", "ip"): "the acting client's address (an owner's, never a visitor's)",
    ("audit_log", "user_agent"): "the acting client's user agent",
    ("audit_log", "changed"): "the names of the settings a change changed, never values",
    ("audit_log", "prev_hash"): "hash",
    ("audit_log", "hash"): "hash",
    ("audit_anchors", "organization_id"): "id",
    ("audit_anchors", "hash"): "hash",
    ("audit_heads", "organization_id"): "id",
    ("audit_heads", "hash"): "hash",
    ("forms", "id"): "id",
    ("forms", "organization_id"): "id",
    ("forms", "name"): "owner's setting",
    ("forms", "allowed_origins"): "owner's setting",
    ("forms", "honeypot_field"): "owner's setting",
    ("forms", "redirect_url"): "owner's setting",
    ("forms", "schema_mode"): "vocabulary",
    ("forms", "labels"): "owner's setting",
    ("forms", "file_fields"): "owner's setting",
    ("forms", "consent_field"): "owner's setting",
    ("forms", "ack_email"): "owner's setting",
    ("forms", "autoresponse"): "owner's setting",
    ("forms", "turnstile_secret"): "owner's secret",
    ("forms", "spam"): "owner's setting",
    ("forms", "spam_secrets"): "owner's secrets",
    ("spam_fingerprints", "form_id"): "id",
    ("spam_fingerprints", "organization_id"): "id",
    ("spam_fingerprints", "fingerprint"): "keyed hash of the values, pruned after its window",
    ("spam_models", "organization_id"): "id",
    ("spam_tokens", "organization_id"): "id",
    ("spam_tokens", "token"): "keyed hash of a field and word; erase takes its counts out",
    ("spam_training", "submission_id"): "id",
    ("spam_training", "organization_id"): "id",
    ("spam_training", "label"): "vocabulary",
    ("spam_training", "tokens"): "keyed hashes of the tokens it taught; erase deletes the row",
    ("ham_due", "submission_id"): "id",
    ("ham_due", "organization_id"): "id",
    ("form_schemas", "organization_id"): "id",
    ("form_schemas", "form_id"): "id",
    ("form_schemas", "schema"): "owner's schema, or suggested: field names and types only",
    ("schema_drift", "organization_id"): "id",
    ("schema_drift", "form_id"): "id",
    ("schema_drift", "path"): "value path: field names only, never values",
    ("schema_drift", "keyword"): "schema keyword",
    ("schema_inference", "organization_id"): "id",
    ("schema_inference", "form_id"): "id",
    ("form_schemas", "source"): "vocabulary",
    ("destination_types", "name"): "vocabulary",
    ("destinations", "id"): "id",
    ("destinations", "organization_id"): "id",
    ("destinations", "type"): "vocabulary",
    ("destinations", "name"): "owner's setting",
    ("destinations", "config"): "owner's setting",
    ("destinations", "health"): "vocabulary",
    ("destinations", "health_stats"): "counts and durations",
    ("destinations", "paused_reason"): "vocabulary",
    ("organizations", "notify"): "owner's setting",
    ("organizations", "notify_destination_id"): "id",
    ("organization_email", "organization_id"): "id",
    ("organization_email", "provider"): "vocabulary",
    ("organization_email", "from_address"): "owner's setting",
    ("organization_email", "smtp_host"): "owner's setting",
    ("organization_email", "smtp_username"): "owner's setting",
    ("organization_email", "smtp_tls"): "vocabulary",
    ("organization_email", "ses_region"): "owner's setting",
    ("organization_email", "ses_access_key_id"): "owner's setting",
    ("organization_email", "secret"): "owner's secret",
    ("notifications", "organization_id"): "id",
    ("notifications", "kind"): "vocabulary",
    ("notifications", "subject_id"): "id, or a month",
    ("notifications", "data"): "names (owner's settings), counts, times; never a reason",
    ("notifications", "delivery_id"): "id",
    ("notifications", "destination_delivery_id"): "id",
    ("destination_secrets", "organization_id"): "id",
    ("destination_secrets", "destination_id"): "id",
    ("destination_secrets", "secret"): "owner's secret",
    ("routes", "id"): "id",
    ("routes", "organization_id"): "id",
    ("routes", "form_id"): "id",
    ("routes", "destination_id"): "id",
    ("routes", "include_statuses"): "vocabulary",
    ("routes", "mode"): "vocabulary",
    ("routes", "period"): "vocabulary",
    ("routes", "template"): "owner's template",
    ("submissions", "id"): "id",
    ("submissions", "organization_id"): "id",
    ("submissions", "form_id"): "id",
    ("submissions", "status"): "vocabulary",
    ("submissions", "reason"): "vocabulary",
    ("submissions", "flags"): "vocabulary",
    ("submissions", "idempotency_key"): "the client's token, kept to recognise a repeat",
    ("submissions", "payload_hash"): "hash, kept to recognise a repeat",
    ("submissions", "client_hash"): "keyed hash of the client address",
    ("submissions", "erase_reason"): "vocabulary",
    # Erased with the values all the same: the consent is the visitor's.
    ("submissions", "form_snapshot"): "the form's name and labels (owner's), the consent as yes/no",
    ("stored_objects", "storage_key"): "ids",
    ("stored_objects", "organization_id"): "id",
    ("stored_objects", "submission_id"): "id",
    ("stored_objects", "last_error"): "storage error",
    ("attachments", "id"): "id",
    ("attachments", "organization_id"): "id",
    ("attachments", "submission_id"): "id",
    ("attachments", "field"): "field name",
    ("attachments", "content_type"): "sniffed type",
    ("attachments", "sha256"): "hash",
    ("attachments", "storage_key"): "ids",
    ("digests", "id"): "id",
    ("digests", "organization_id"): "id",
    ("digests", "route_id"): "id",
    ("digests", "period_key"): "period",
    ("deliveries", "id"): "id",
    ("deliveries", "replay_id"): "id",
    ("replays", "id"): "id",
    ("replays", "organization_id"): "id",
    ("replays", "filter"): "the owner's filter: ids, statuses and times",
    ("deliveries", "organization_id"): "id",
    ("deliveries", "kind"): "vocabulary",
    ("deliveries", "submission_id"): "id",
    ("deliveries", "route_id"): "id",
    ("deliveries", "digest_id"): "id",
    ("deliveries", "destination_id"): "id",
    ("deliveries", "channel"): "vocabulary",
    ("deliveries", "status"): "vocabulary",
    ("deliveries", "template"): "the route's subject and text templates (owner's)",
    ("delivery_attempts", "organization_id"): "id",
    ("delivery_attempts", "delivery_id"): "id",
    ("delivery_attempts", "outcome"): "vocabulary",
    ("delivery_attempts", "error_class"): "vocabulary",
    ("events", "organization_id"): "id",
    ("events", "type"): "vocabulary",
    ("events", "subject_id"): "id",
    ("alerts", "id"): "id",
    ("alerts", "organization_id"): "id",
    ("alerts", "kind"): "vocabulary",
    ("alerts", "subject_id"): "id",
    ("alerts", "status"): "vocabulary",
    ("alerts", "last_delivery_id"): "id",
    ("alerts", "resolved_by_delivery_id"): "id",
    ("usage_counters", "organization_id"): "id",
    ("worker_heartbeats", "worker_id"): "worker name",
    ("worker_heartbeats", "tick"): "vocabulary",
    ("worker_heartbeats", "last_pass"): "counters",
    ("outbox_claim_cursor", "visited_org"): "id",
    ("dashboard_sessions", "id_hash"): "hash",
    ("acknowledgement_counts", "recipient_hash"): "hash",
    ("autoresponse_counts", "scope"): "id",
    ("autoresponse_counts", "recipient_hash"): "hash",
    ("email_suppressions", "recipient_hash"): "hash, the mailbox's own request or its provider's",
    ("email_suppressions", "reason"): "vocabulary",
    ("dashboard_sessions", "organization_id"): "id",
    ("dashboard_sessions", "id"): "id",
    ("dashboard_sessions", "member_id"): "id",
    ("dashboard_sessions", "user_agent"): "the member's browser",
    ("members", "id"): "id",
    ("members", "email"): "a member's address (not a visitor's)",
    ("members", "password_hash"): "argon2id hash",
    ("members", "totp_secret"): "the member's second factor",
    ("members", "totp_pending"): "the member's second factor",
    ("member_recovery_codes", "member_id"): "id",
    ("member_recovery_codes", "code_hash"): "hash",
    ("memberships", "organization_id"): "id",
    ("memberships", "member_id"): "id",
    ("memberships", "role"): "vocabulary",
    ("invitations", "id"): "id",
    ("invitations", "organization_id"): "id",
    ("invitations", "email"): "a member's address (not a visitor's)",
    ("invitations", "role"): "vocabulary",
    ("invitations", "token_hash"): "hash",
    ("invitations", "invited_by"): "a member's address or a key's name",
    ("invitations", "sender_kind"): "vocabulary",
    ("invitations", "sender_id"): "id",
    ("reset_counts", "recipient_hash"): "hash",
    ("member_links", "token_hash"): "hash",
    ("member_links", "member_id"): "id",
    ("member_links", "kind"): "vocabulary",
    ("dashboard_sessions", "csrf_token"): "random token",
    ("auth_failures", "kind"): "vocabulary",
    ("auth_failures", "client_hash"): "keyed hash of the client address",
    ("schema_migrations", "name"): "file name",
    ("schema_migrations", "checksum"): "hash",
    ("hooks", "id"): "id",
    ("hooks", "organization_id"): "id",
    ("hooks", "event"): "vocabulary",
    ("hooks", "destination_id"): "id",
    ("hooks", "form_id"): "id",
    ("hooks", "route_id"): "id",
    ("hooks", "stream_id"): "id",
    ("hooks", "stream_route_id"): "id",
    ("hooks", "deleted_reason"): "vocabulary",
    ("audit_exports", "organization_id"): "id",
    ("audit_exports", "last_hash"): "hash",
    ("dashboard_sessions", "sso_organization_id"): "id",
    ("dashboard_sessions", "sso_refresh_token"): "the provider's secret",
    ("organization_sso", "organization_id"): "id",
    ("organization_sso", "issuer"): "owner's setting",
    ("organization_sso", "client_id"): "owner's setting",
    ("organization_sso", "client_secret"): "owner's secret",
    ("organization_sso", "default_role"): "vocabulary",
    ("organization_sso", "scopes"): "owner's setting",
    ("sso_attempts", "organization_id"): "id",
    ("sso_attempts", "state_hash"): "hash",
    ("sso_attempts", "nonce"): "random",
    ("sso_attempts", "code_verifier"): "random",
    ("sso_domains", "domain"): "owner's setting",
    ("sso_domains", "organization_id"): "id",
    ("history_partitions", "name"): "table name",
    ("history_partitions", "parent"): "table name",
    ("submission_keys", "form_id"): "id",
    ("submission_keys", "idempotency_key"): "the client's token, kept to recognise a repeat",
    ("submission_keys", "organization_id"): "id",
    ("submission_keys", "submission_id"): "id",
    ("streams", "id"): "id",
    ("streams", "organization_id"): "id",
    ("streams", "name"): "owner's setting",
    ("streams", "schema_mode"): "vocabulary",
    ("stream_keys", "id"): "id",
    ("stream_keys", "organization_id"): "id",
    ("stream_keys", "stream_id"): "id",
    ("stream_keys", "name"): "owner's setting",
    ("stream_keys", "prefix"): "key prefix",
    ("stream_keys", "key_hash"): "hash",
    ("stream_schemas", "organization_id"): "id",
    ("stream_schemas", "stream_id"): "id",
    ("stream_schemas", "event_type"): "owner's setting",
    ("stream_schemas", "schema"): "owner's schema",
    ("stream_schemas", "source"): "vocabulary",
    ("stream_events", "id"): "id",
    ("stream_events", "organization_id"): "id",
    ("stream_events", "stream_id"): "id",
    ("stream_events", "client_id"): "the client's event id, kept to recognise a repeat",
    ("stream_events", "idempotency_key"): "the client's token, kept to recognise a repeat",
    ("stream_events", "type"): "the client's event type, kept to route and list",
    ("stream_events", "status"): "vocabulary",
    ("stream_events", "reason"): "vocabulary",
    ("stream_events", "payload_hash"): "hash, kept to recognise a repeat",
    ("stream_events", "erase_reason"): "vocabulary",
    ("stream_routes", "id"): "id",
    ("stream_routes", "organization_id"): "id",
    ("stream_routes", "stream_id"): "id",
    ("stream_routes", "destination_id"): "id",
    ("stream_routes", "event_types"): "owner's setting",
    ("stream_routes", "include_statuses"): "vocabulary",
    ("deliveries", "event_id"): "id",
    ("deliveries", "stream_route_id"): "id",
}

_TEXT_COLUMNS = """
SELECT c.table_name, c.column_name
  FROM information_schema.columns c
  JOIN information_schema.tables t
    ON t.table_schema = c.table_schema AND t.table_name = c.table_name
  JOIN pg_class r ON r.oid = to_regclass(c.table_name)
 WHERE c.table_schema = 'public' AND t.table_type = 'BASE TABLE' AND NOT r.relispartition
   AND (c.data_type IN ('text', 'character varying', 'character', 'json', 'jsonb', 'bytea',
                        'tsvector')
        OR (c.data_type = 'ARRAY' AND c.udt_name IN ('_text', '_varchar', '_jsonb', '_bytea')))
"""

SCHEMA = {"type": "object", "properties": {"phone": {"type": "integer"}}}
ACK = {"field": "email", "subject": "Thanks", "text": "We got it."}


async def _text_columns(conn: Conn) -> set[tuple[str, str]]:
    return {(r["table_name"], r["column_name"]) for r in await rows(conn, _TEXT_COLUMNS)}


async def test_every_text_column_is_classified(conn: Conn) -> None:
    values = VALUE_COLUMNS.keys() | EVENT_VALUE_COLUMNS.keys()
    assert not values & OTHER_COLUMNS.keys()
    assert await _text_columns(conn) == values | OTHER_COLUMNS.keys()


async def _holding_the_mark(conn: Conn) -> set[tuple[str, str]]:
    found = set()
    for table, column in sorted(await _text_columns(conn)):
        # Identifiers from information_schema, never from input.
        sql = f'SELECT 1 FROM {table} WHERE "{column}"::text ILIKE %(mark)s LIMIT 1'
        if await rows(conn, sql, mark=f"%{MARK}%"):
            found.add((table, column))
    return found


def _echo(request: Request) -> tuple[int, dict[str, str], bytes]:
    """A receiver that fails and echoes the body back."""
    return 500, {}, request.body


@pytest.fixture
def peers() -> Iterator[tuple[Peer, Peer, Peer]]:
    with (
        receiver(_echo) as echo,
        receiver(status(400, body=f"invalid_payload: {MARK}".encode())) as chat,
        receiver() as ok,
    ):
        yield echo, chat, ok


async def _world(
    services: Services, conn: Conn, peers: tuple[Peer, Peer, Peer], ses: Any
) -> tuple[Tenant, list[str]]:
    """One of each: an accepted JSON post (acknowledged, echoed back, refused by a chat
    service with the value in its error, listed in a digest), a quarantined post (schema
    drift) and a multipart post with a file; returns the tenant and the receipts."""
    echo, chat, ok = peers
    tenant, form = await setup_form(
        conn,
        plan="self_hosted",
        routes=0,
        schema_mode="enforce",
        consent_field="consent",
        ack_email=ACK,
        file_fields={"cv": {"types": [".pdf"], "max_files": 1}},
    )
    await add_schema(conn, tenant, form, SCHEMA)
    webhook = await make_destination(conn, tenant, config={"url": f"{echo.url}/hook"})
    await make_route(conn, tenant, form, webhook, include_statuses=["accepted", "quarantined"])
    slack_url = f"{chat.url}/services/T0/B0/secret"
    await make_route_to(
        conn,
        tenant,
        form,
        type="slack",
        config={"url": redact_url(slack_url)},
        secrets=(slack_url,),
    )
    digest_to = await make_destination(conn, tenant, config={"url": f"{ok.url}/digest"})
    await make_route(
        conn,
        tenant,
        form,
        digest_to,
        mode="digest",
        period="daily",
        updated_at=utcnow() - timedelta(days=3),
    )
    headers = {"Accept": "application/json", "Referer": f"https://site.example/?who={MARK}"}
    async with submit_client(services) as client:
        answers = [
            await client.post(
                f"/s/{form}",
                json={
                    "name": f"Ada {MARK}",
                    "email": f"{MARK.lower()}@example.com",
                    "consent": True,
                    "phone": 1,
                    f"ref_{MARK}": "",
                },
                headers=headers,
            ),
            await client.post(
                f"/s/{form}", json={"name": "Bo", "phone": f"+44 {MARK}"}, headers=headers
            ),
            await client.post(
                f"/s/{form}",
                data={"name": "Cy"},
                files=[("cv", (f"{MARK}.pdf", pdf(), "application/pdf"))],
                headers=headers,
            ),
        ]
    assert [a.status_code for a in answers] == [201, 201, 201], [a.text for a in answers]
    receipts = [str(a.json()["receipt"]) for a in answers]
    mail = with_settings(services, email_provider="ses", mail_from=SENDER)
    await Deliverer(mail, options=WorkerOptions(timeout=2, margin=0.1)).run_pass(
        now=utcnow(), budget=10
    )
    assert len(ses.sent_messages) == 1
    await conn.execute(
        "UPDATE submissions SET received_at = received_at - interval '2 days',"
        " erase_at = erase_at - interval '2 days'"
    )
    assert (await run_digests(services, now=utcnow(), budget=10))["digests"] == 1
    # The owner marks the quarantined one as spam: the learned filter learns its tokens.
    async with api_client(services, tenant.key) as api:
        marked = await api.post(f"/v1/submissions/{receipts[1]}/spam")
        assert marked.status_code == 200, marked.text
    assert len(await rows(conn, "SELECT 1 FROM spam_training")) == 1
    assert await rows(conn, "SELECT 1 FROM spam_tokens")
    return tenant, receipts


async def _model_forgot(conn: Conn) -> bool:
    """Whether the learned filter holds nothing of the erased submissions."""
    return (
        await rows(conn, "SELECT 1 FROM spam_training") == []
        and await rows(conn, "SELECT 1 FROM spam_tokens") == []
        and await rows(conn, "SELECT spam_docs, ham_docs FROM spam_models")
        == [{"spam_docs": 0, "ham_docs": 0}]
    )


@pytest.mark.slow
async def test_erase__no_value_survives_anywhere(
    services: Services,
    conn: Conn,
    peers: tuple[Peer, Peer, Peer],
    ses: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="postbag")
    tenant, receipts = await _world(services, conn, peers, ses)
    assert await _holding_the_mark(conn) == VALUE_COLUMNS.keys()
    async with api_client(services, tenant.key) as api:
        for receipt in receipts:
            erased = await api.post(f"/v1/submissions/{receipt}/erase")
            assert erased.status_code == 200, erased.text
    assert await _holding_the_mark(conn) == set()
    assert await _model_forgot(conn)
    ours = [r for r in caplog.records if r.name.startswith("postbag")]
    assert ours and not [r for r in ours if MARK in str(r.__dict__)]


@pytest.mark.slow
async def test_expiry__no_value_survives_anywhere(
    db_url: str,
    tmp_path: Path,
    services: Services,
    conn: Conn,
    peers: tuple[Peer, Peer, Peer],
    ses: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    await _world(services, conn, peers, ses)
    assert await _holding_the_mark(conn) == VALUE_COLUMNS.keys()
    await conn.execute("UPDATE submissions SET erase_at = now() - interval '1 minute'")
    event = load_event("eventbridge_scheduled.json")
    [stats] = await asyncio.to_thread(
        invoke,
        "retention_tick",
        [event],
        FakeContext(remaining_ms=20_000),
        monkeypatch,
        POSTBAG_DATABASE_URL=db_url,
        POSTBAG_SECRET_KEY=TEST_SECRET_KEY,
        POSTBAG_STORAGE_URL=services.settings.storage_url,
    )
    assert stats["expired"] == 3
    assert await _holding_the_mark(conn) == set()
    assert await _model_forgot(conn)
