"""The catalog after every migration, held to what a tenant-distributed PostgreSQL (Citus)
needs (docs/scale.md): every table is distributed by `organization_id`, or listed here as a
reference or local table with its reason; a distributed table names `organization_id` in its
primary key and in every unique key; foreign keys join co-located rows.

There is no Citus server in the tests: this catalog check is what holds the schema to it.
"""

from __future__ import annotations

from core.platform.db import Conn
from tests.support.records import rows

# Replicated to every node: small, written rarely, read by every tenant's queries or by a
# lookup that comes before any organization is known.
REFERENCE = {
    "organizations": "the tenants themselves; every tenant table's foreign key points here",
    "members": "an account across organizations; signs in before choosing one",
    "member_links": "sign-in and reset links, looked up by token before any organization",
    "member_recovery_codes": "a member's two-factor recovery codes, across organizations",
    "destination_types": "the installation's destination types, joined by every claim",
    "organization_sso": "an organization's SSO settings, read at sign-in from the domain's lookup",
    "sso_domains": "a domain belongs to one organization across the installation (its key)",
}

# Kept on the coordinator: installation-wide bookkeeping, or rows of no single tenant.
LOCAL = {
    "schema_migrations": "the migrations applied to the installation",
    "history_partitions": "the dated partitions of the history tables, for the retention tick",
    "worker_heartbeats": "the installation's workers and the ticks they ran",
    "outbox_claim_cursor": "one row: the organization the last claim visited last",
    "auth_failures": "sign-in and key failures per client address, before any organization",
    "acknowledgement_counts": "acknowledgements per recipient and day, across organizations",
    "autoresponse_counts": "autoresponses per recipient and day, across organizations",
    "reset_counts": "password reset mails per recipient, before any organization",
    "email_suppressions": "the installation's list of mailboxes no email goes to",
    "dashboard_sessions": "its organization_id is the member's current one and changes on a "
    "switch; a distribution column never changes",
}

_TABLES = """
SELECT c.relname AS name, c.relispartition AS partition,
       coalesce(p.relname, c.relname) AS parent,
       EXISTS (SELECT 1 FROM pg_attribute a
                WHERE a.attrelid = c.oid AND a.attname = 'organization_id'
                  AND NOT a.attisdropped) AS tenant,
       EXISTS (SELECT 1 FROM pg_constraint k
                WHERE k.conrelid = c.oid AND k.contype = 'p') AS keyed
  FROM pg_class c
  LEFT JOIN pg_inherits i ON i.inhrelid = c.oid
  LEFT JOIN pg_class p ON p.oid = i.inhparent
 WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p')
 ORDER BY c.relname
"""

# Each unique index (primary keys, unique constraints, partial and expression indexes) and
# whether organization_id is among its key columns.
_UNIQUE_KEYS = """
SELECT t.relname AS "table", x.relname AS key, pg_get_indexdef(i.indexrelid) AS definition,
       EXISTS (SELECT 1 FROM pg_attribute a
                WHERE a.attrelid = t.oid AND a.attname = 'organization_id'
                  AND a.attnum = ANY ((i.indkey::int2[])[0:i.indnkeyatts - 1])) AS scoped
  FROM pg_index i
  JOIN pg_class t ON t.oid = i.indrelid
  JOIN pg_class x ON x.oid = i.indexrelid
 WHERE t.relnamespace = 'public'::regnamespace AND i.indisunique
 ORDER BY 1, 2
"""

# Each foreign key declared on a table (a partition's inherited copies are its parent's),
# and whether it pairs organization_id with organization_id.
_FOREIGN_KEYS = """
SELECT f.conname AS name, c.relname AS child, p.relname AS parent,
       EXISTS (SELECT 1 FROM unnest(f.conkey, f.confkey) AS k(child_col, parent_col)
                 JOIN pg_attribute ca ON ca.attrelid = f.conrelid AND ca.attnum = k.child_col
                 JOIN pg_attribute pa ON pa.attrelid = f.confrelid AND pa.attnum = k.parent_col
                WHERE ca.attname = 'organization_id' AND pa.attname = 'organization_id')
           AS co_located
  FROM pg_constraint f
  JOIN pg_class c ON c.oid = f.conrelid
  JOIN pg_class p ON p.oid = f.confrelid
 WHERE f.contype = 'f' AND f.connamespace = 'public'::regnamespace AND f.conparentid = 0
 ORDER BY 1
"""


async def _distributed(conn: Conn) -> set[str]:
    """The tables distributed by organization_id, and their partitions."""
    return {
        t["name"]
        for t in await rows(conn, _TABLES)
        if t["tenant"] and t["parent"] not in REFERENCE and t["parent"] not in LOCAL
    }


async def test_distribution__every_table_is_distributed_or_listed(conn: Conn) -> None:
    tables = await rows(conn, _TABLES)
    names = {t["name"] for t in tables}
    unlisted = {
        t["name"]
        for t in tables
        if not t["tenant"] and t["parent"] not in REFERENCE and t["parent"] not in LOCAL
    }
    assert unlisted == set(), "a table without organization_id: list it as reference or local"
    assert set(REFERENCE) - names == set(), "a listed table no longer exists"
    assert set(LOCAL) - names == set(), "a listed table no longer exists"
    assert set(REFERENCE) & set(LOCAL) == set()
    assert "submissions" in await _distributed(conn)


async def test_distribution__every_distributed_table_has_a_primary_key(conn: Conn) -> None:
    distributed = await _distributed(conn)
    unkeyed = {
        t["name"] for t in await rows(conn, _TABLES) if t["name"] in distributed and not t["keyed"]
    }
    assert unkeyed == set()


async def test_distribution__organization_id_in_every_unique_key(conn: Conn) -> None:
    distributed = await _distributed(conn)
    keys = [k for k in await rows(conn, _UNIQUE_KEYS) if k["table"] in distributed]
    unscoped = [k["definition"] for k in keys if not k["scoped"]]
    assert unscoped == []
    # Partitions included: the weekly ones carry their parent's key.
    assert {"events_default", "delivery_attempts_default"} <= {k["table"] for k in keys}


async def test_distribution__foreign_keys_join_co_located_rows(conn: Conn) -> None:
    distributed = await _distributed(conn)
    wrong = []
    for fk in await rows(conn, _FOREIGN_KEYS):
        child, parent = fk["child"], fk["parent"]
        if child in distributed and parent in distributed:
            allowed = fk["co_located"]
        elif child in LOCAL:
            # Citus refuses a key from a local table to a distributed one.
            allowed = parent in REFERENCE or parent in LOCAL
        else:
            # A distributed or reference table's other keys point at reference tables.
            allowed = parent in REFERENCE
        if not allowed:
            wrong.append(fk["name"])
    assert wrong == []
