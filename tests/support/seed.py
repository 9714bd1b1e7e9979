"""A row in every tenant table for one organization, inserted as the owner through SQL."""

from __future__ import annotations

from core.platform.db import Conn
from core.platform.ids import new_id

SEED_SQL = """
INSERT INTO organizations (id, name) VALUES (%(org)s, 'Seed');
INSERT INTO api_keys (id, organization_id, name, prefix, key_hash)
    VALUES (%(key)s, %(org)s, 'k', 'pb_x', %(key_hash)s);
INSERT INTO forms (id, organization_id, name) VALUES (%(frm)s, %(org)s, 'Contact');
INSERT INTO form_schemas (organization_id, form_id, version, schema)
    VALUES (%(org)s, %(frm)s, 1, '{}');
INSERT INTO destinations (id, organization_id, type, name, config)
    VALUES (%(dst)s, %(org)s, 'webhook', 'Hook', '{"url": "https://example.com/h"}');
INSERT INTO destination_secrets (organization_id, destination_id, version, secret)
    VALUES (%(org)s, %(dst)s, 1, 'whsec_0123456789abcdef');
INSERT INTO routes (id, organization_id, form_id, destination_id)
    VALUES (%(rte)s, %(org)s, %(frm)s, %(dst)s);
INSERT INTO submissions (id, organization_id, form_id, status, "values", payload_hash,
                         idempotency_key)
    VALUES (%(sub)s, %(org)s, %(frm)s, 'accepted', '{"email": "a@example.com"}', '\\x00',
            'idem-1');
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
                        max_attempts, payload, target, secret_version)
    VALUES (%(dlv)s, %(org)s, %(sub)s, %(rte)s, %(dst)s, 'webhook', 10, '{}', '{}', 1);
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
INSERT INTO dashboard_sessions (id_hash, organization_id, api_key_id, csrf_token)
    VALUES (%(key_hash)s, %(org)s, %(key)s, repeat('c', 32));
"""


async def seed_organization(conn: Conn) -> dict[str, str]:
    """Insert one row per tenant table for a new organization; return the ids used."""
    ids = {
        name: new_id(prefix)
        for name, prefix in [
            ("org", "org"),
            ("key", "key"),
            ("frm", "frm"),
            ("dst", "dst"),
            ("rte", "rte"),
            ("sub", "sub"),
            ("att", "att"),
            ("dgs", "dgs"),
            ("dlv", "dlv"),
            ("dlv2", "dlv"),
            ("alr", "alr"),
        ]
    }
    params: dict[str, object] = {**ids, "key_hash": ids["key"].encode()}
    async with conn.transaction():
        for statement in SEED_SQL.split(";\n"):
            if statement.strip():
                await conn.execute(statement, params)
    return ids
