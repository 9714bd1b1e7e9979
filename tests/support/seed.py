"""A row in every tenant table for one organization: the builders, then SQL for the rest."""

from __future__ import annotations

import secrets

from core.platform.db import Conn
from core.platform.ids import new_id
from tests.support.builders import (
    add_schema,
    make_form,
    make_route_to,
    make_submission,
    make_tenant,
)

SEED_SQL = """
INSERT INTO stored_objects (storage_key, organization_id, submission_id)
    VALUES (%(sub)s || '/file', %(org)s, %(sub)s);
INSERT INTO attachments (id, organization_id, submission_id, field, name, content_type, size,
                         sha256, storage_key)
    VALUES (%(att)s, %(org)s, %(sub)s, 'cv', 'cv.pdf', 'application/pdf', 10, '\\x00',
            %(sub)s || '/file');
INSERT INTO digests (id, organization_id, route_id, period_key, period_start, period_end,
                     submission_count)
    VALUES (%(dgs)s, %(org)s, %(rte)s, '2026-01-01', '2026-01-01', '2026-01-02', 1);
INSERT INTO deliveries (id, organization_id, submission_id, route_id, destination_id, channel,
                        max_attempts, target, secret_version)
    VALUES (%(dlv)s, %(org)s, %(sub)s, %(rte)s, %(dst)s, 'webhook', 10, '{}', 1);
INSERT INTO deliveries (id, organization_id, kind, digest_id, route_id, destination_id,
                        channel, max_attempts, payload, target)
    VALUES (%(dlv2)s, %(org)s, 'digest', %(dgs)s, %(rte)s, %(dst)s, 'webhook', 10, '{}', '{}');
INSERT INTO delivery_attempts (organization_id, delivery_id, attempt, claim_token, started_at,
                               duration_ms, outcome, http_status)
    VALUES (%(org)s, %(dlv)s, 1, gen_random_uuid(), now(), 12, 'sent', 200);
INSERT INTO events (organization_id, type, subject_id)
    VALUES (%(org)s, 'submission.received', %(sub)s);
INSERT INTO alerts (id, organization_id, kind, subject_id)
    VALUES (%(alr)s, %(org)s, 'delivery.dead', %(dst)s);
INSERT INTO usage_counters (organization_id, month, submissions)
    VALUES (%(org)s, '2026-01-01', 1);
INSERT INTO schema_drift (organization_id, form_id, hour, path, keyword, count, first_seen,
                          last_seen)
    VALUES (%(org)s, %(frm)s, '2026-01-01', '/email', 'format', 1, now(), now());
INSERT INTO schema_inference (organization_id, form_id, scanned_through)
    VALUES (%(org)s, %(frm)s, now());
INSERT INTO streams (id, organization_id, name) VALUES (%(str)s, %(org)s, 'Orders');
INSERT INTO stream_keys (id, organization_id, stream_id, name, prefix, key_hash)
    VALUES (%(sky)s, %(org)s, %(str)s, 'ingest', 'pbs_', %(key_hash)s);
INSERT INTO stream_schemas (organization_id, stream_id, version, schema)
    VALUES (%(org)s, %(str)s, 1, '{}');
INSERT INTO stream_events (id, organization_id, stream_id, type, status, data, payload_hash)
    VALUES (%(evt)s, %(org)s, %(str)s, 'order.paid', 'accepted', '{}', '\\x00');
INSERT INTO stream_routes (id, organization_id, stream_id, destination_id)
    VALUES (%(srt)s, %(org)s, %(str)s, %(dst)s);
INSERT INTO deliveries (id, organization_id, kind, event_id, stream_route_id, destination_id,
                        channel, max_attempts, target)
    VALUES (%(dlv3)s, %(org)s, 'event', %(evt)s, %(srt)s, %(dst)s, 'webhook', 10, '{}');
INSERT INTO hooks (id, organization_id, event, destination_id, form_id, route_id, created_at)
    VALUES (%(hok)s, %(org)s, 'submission.created', %(dst)s, %(frm)s, %(rte)s, now());
INSERT INTO deliveries (id, organization_id, kind, destination_id, channel, max_attempts,
                        payload, target)
    VALUES (%(dlv4)s, %(org)s, 'lifecycle', %(dst)s, 'webhook', 10, '{}', '{}');
INSERT INTO replays (id, organization_id, filter, total, per_second)
    VALUES (%(rpl)s, %(org)s, '{}', 0, 10);
INSERT INTO notifications (organization_id, kind, subject_id, created_at)
    VALUES (%(org)s, 'delivery.dead', %(alr)s, now());
INSERT INTO spam_fingerprints (form_id, organization_id, fingerprint, window_start, count)
    VALUES (%(frm)s, %(org)s, '\\x00112233445566778899aabbccddeeff', now(), 1);
INSERT INTO spam_models (organization_id, spam_docs) VALUES (%(org)s, 1);
INSERT INTO spam_tokens (organization_id, token, spam) VALUES (%(org)s, '\\x0011223344556677', 1);
INSERT INTO spam_training (submission_id, organization_id, label, tokens, trained_at)
    VALUES (%(sub)s, %(org)s, 'spam', ARRAY['\\x0011223344556677'::bytea], now());
INSERT INTO members (id, email) VALUES (%(mem)s, %(mem)s || '@example.test');
INSERT INTO memberships (organization_id, member_id, role) VALUES (%(org)s, %(mem)s, 'owner');
INSERT INTO organization_email (organization_id, provider, from_address, secret)
    VALUES (%(org)s, 'resend', 'hello@seed.example', 're_seed');
INSERT INTO dashboard_sessions (id, id_hash, organization_id, member_id, csrf_token)
    VALUES (%(ses)s, %(session)s, %(org)s, %(mem)s, repeat('c', 32));
INSERT INTO invitations (id, organization_id, email, role, token_hash, invited_by, sender_kind,
                         sender_id, expires_at)
    VALUES (%(inv)s, %(org)s, 'invited@example.test', 'viewer', %(key_hash)s, 'seed', 'member',
            %(mem)s, now() + interval '7 days');
INSERT INTO audit_log (id, organization_id, seq, at, actor_kind, actor_id, actor_name, action,
                       subject, via, prev_hash, hash)
    VALUES (%(aud)s, %(org)s, 1, now(), 'key', 'key_seed', 'seed', 'form.created', %(frm)s,
            'api', repeat('0', 64), repeat('a', 64));
INSERT INTO audit_anchors (organization_id, seq, hash, forgotten_at)
    VALUES (%(org)s, 1, repeat('a', 64), now());
INSERT INTO audit_exports (organization_id, day, last_seq, last_hash, last_at, exported_at)
    VALUES (%(org)s, current_date, 1, repeat('a', 64), now(), now());
INSERT INTO organization_sso (organization_id, issuer, client_id)
    VALUES (%(org)s, 'https://idp.example', 'postbag');
INSERT INTO sso_domains (domain, organization_id) VALUES (%(org)s || '.example', %(org)s);
INSERT INTO sso_attempts (state_hash, organization_id, nonce, code_verifier, expires_at)
    VALUES (%(session)s, %(org)s, 'n', 'v', now());
"""

# The tables of later migrations, each written when it is there: the upgrade tests seed an
# earlier release (tests/support/migrations.py).
LATER_SEED_SQL = {
    "ham_due": """INSERT INTO ham_due (submission_id, organization_id, due_at)
    VALUES (%(sub)s, %(org)s, now() + interval '3 days')""",
    "submission_keys": """INSERT INTO submission_keys (form_id, idempotency_key,
                             organization_id, submission_id)
    VALUES (%(frm)s, 'idem-1', %(org)s, %(sub)s)""",
}


async def seed_organization(conn: Conn) -> dict[str, str]:
    """One row per tenant table for a new organization; returns the ids used, by table."""
    tenant = await make_tenant(conn, name="Seed")
    frm = await make_form(conn, tenant)
    await add_schema(conn, tenant, frm, {})
    dst, rte = await make_route_to(
        conn,
        tenant,
        frm,
        config={"url": "https://example.com/h"},
        secrets=("whsec_0123456789abcdef",),
    )
    sub = await make_submission(
        conn, tenant, frm, {"email": "a@example.com"}, idempotency_key="idem-1"
    )
    ids = {
        "org": tenant.org,
        "frm": frm,
        "dst": dst,
        "rte": rte,
        "sub": sub,
        "att": new_id("att"),
        "dgs": new_id("dgs"),
        "dlv": new_id("dlv"),
        "dlv2": new_id("dlv"),
        "alr": new_id("alr"),
        "str": new_id("str"),
        "sky": new_id("sky"),
        "evt": new_id("evt"),
        "srt": new_id("srt"),
        "dlv3": new_id("dlv"),
        "hok": new_id("hok"),
        "dlv4": new_id("dlv"),
        "rpl": new_id("rpl"),
        "mem": new_id("mem"),
        "ses": new_id("ses"),
        "inv": new_id("inv"),
        "aud": new_id("aud"),
    }
    params: dict[str, object] = {
        **ids,
        "session": secrets.token_bytes(16),
        "key_hash": secrets.token_bytes(32),
    }
    async with conn.transaction():
        for statement in SEED_SQL.split(";\n"):
            if statement.strip():
                await conn.execute(statement, params)
        for table, statement in LATER_SEED_SQL.items():
            cur = await conn.execute("SELECT to_regclass(%(t)s) AS found", {"t": table})
            found = await cur.fetchone()
            if found is not None and found["found"] is not None:
                await conn.execute(statement, params)
    return ids
