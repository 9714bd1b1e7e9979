"""The audit trail: one row per change and per read of visitors' data, never the values.

Each organization's rows form a hash chain: a row stores the SHA-256 of the previous row's
hash and its own canonical content (`chain_hash`), so editing, removing or inserting a row
shows at the first row after it. Appends take a per-organization advisory lock, so
concurrent writers never fork the chain; the insert trigger keeps each chain's head (its
newest row ever appended, in `audit_heads`), so removing the newest rows shows too. The
database keeps the table append-only: the application role may only insert and select, and
a trigger refuses UPDATE, DELETE and TRUNCATE to every role but the deletes of the rows at or
before the chain's anchor, which moves only forward onto a row of the chain (retention's
`audit_forget_before`: a whole old prefix). `verify_chains` walks every chain for `postbag
audit verify` (docs/teams.md).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from core.platform.db import Conn
from core.platform.ids import new_id
from core.platform.queries import queries
from core.platform.scope import OrgScope, scoped
from core.platform.vocabulary import AuditActorKind, AuditVia

# Actions that change nothing stored (reads of visitors' data, a destination's test send):
# recorded as the answer goes out. Every other action is a change, recorded in the change's
# own transaction (core/owner/changes.py).
UNCHANGING = frozenset(
    {
        "submission.read",
        "submission.searched",
        "delivery.read",
        "attachment.downloaded",
        "export.downloaded",
        "stream_event.listed",
        "stream_event.read",
        "destination.tested",
        "form.sampled",
        "stream.sampled",
        "email_sender.tested",
    }
)
# Reads of one object recorded once per opening: the same actor's read of the same object
# again within READ_AGAIN_AFTER (the receipt shown again after an action on it, a reload)
# is the one already recorded.
READ_ONCE = frozenset({"submission.read", "delivery.read", "stream_event.read"})
READ_AGAIN_AFTER = timedelta(minutes=15)
# The previous hash of an organization's first row.
ZERO_HASH = "0" * 64
_PAGE = 1000


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """What one audit row says: who, through which surface and from where, did what to which
    object (an id, never a value)."""

    actor_kind: AuditActorKind
    actor_id: str
    actor_name: str
    action: str
    subject: str | None
    via: AuditVia
    ip: str | None
    user_agent: str | None
    # What a change changed, by name (a `form.updated`'s settings), never the values.
    changed: tuple[str, ...] | None = None


def canonical_content(row: Mapping[str, Any]) -> str:
    """What a row's hash covers besides the previous hash: its fields in a fixed order as
    compact JSON, the time in UTC with microseconds (`canonical_time`), and `changed`, last,
    when set."""
    content = [
        row["id"],
        row["organization_id"],
        row["seq"],
        canonical_time(row["at"]),
        row["actor_kind"],
        row["actor_id"],
        row["actor_name"],
        row["action"],
        row["subject"],
        row["via"],
        row["ip"],
        row["user_agent"],
    ]
    if row.get("changed") is not None:
        # Only when set: a row without it (every row before 0040) hashes as it did.
        content.append(list(row["changed"]))
    return json.dumps(content, ensure_ascii=False, separators=(",", ":"))


def canonical_time(at: datetime) -> str:
    """A row's time as its hash covers it: UTC, microseconds, `+00:00`."""
    return at.astimezone(UTC).isoformat(timespec="microseconds")


def chain_hash(prev_hash: str, row: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of the previous row's hash and the row's canonical content."""
    return hashlib.sha256((prev_hash + canonical_content(row)).encode()).hexdigest()


@scoped
async def record(conn: Conn, scope: OrgScope, entry: AuditEntry) -> dict[str, Any]:
    """Append `entry` to the organization's chain within the caller's transaction."""
    org = {"organization_id": scope.organization_id}
    await conn.execute(queries["lock_audit_chain"], org)
    head = await (await conn.execute(queries["audit_head"], org)).fetchone()
    assert head is not None
    row: dict[str, Any] = {
        "id": new_id("aud"),
        "organization_id": scope.organization_id,
        "seq": head["seq"] + 1,
        "at": head["now"],
        **asdict(entry),
        "changed": None if entry.changed is None else list(entry.changed),
        "prev_hash": head["hash"] or ZERO_HASH,
    }
    row["hash"] = chain_hash(row["prev_hash"], row)
    await conn.execute(queries["insert_audit_row"], row)
    return row


@scoped
async def record_read(conn: Conn, scope: OrgScope, entry: AuditEntry) -> dict[str, Any] | None:
    """Append a read of one object (an action of READ_ONCE) unless the same actor's read of
    it is recorded within READ_AGAIN_AFTER; None when it was."""
    await conn.execute(queries["lock_audit_chain"], {"organization_id": scope.organization_id})
    cur = await conn.execute(
        queries["recent_read"],
        {
            "organization_id": scope.organization_id,
            "window": READ_AGAIN_AFTER,
            "actor_kind": entry.actor_kind,
            "actor_id": entry.actor_id,
            "action": entry.action,
            "subject": entry.subject,
        },
    )
    if await cur.fetchone() is not None:
        return None
    return await record(conn, scope, entry)


@scoped
async def list_audit(
    conn: Conn,
    scope: OrgScope,
    *,
    actor: str | None,
    action: str | None,
    subject: str | None,
    since: datetime | None,
    before: int | None,
    limit: int,
) -> list[dict[str, Any]]:
    """Up to `limit` rows, newest first, before the chain position `before`, filtered by
    actor (id or name), action, subject and time, each exact."""
    cur = await conn.execute(
        queries["list_audit"],
        {
            "organization_id": scope.organization_id,
            "actor": actor,
            "action": action,
            "subject": subject,
            "since": since,
            "before": before,
            "limit": limit,
        },
    )
    return await cur.fetchall()


@dataclass(frozen=True, slots=True)
class ChainReport:
    """One organization's chain as verified: rows checked, its head (the newest row ever
    appended), and the first broken row with what is wrong (no id when it is gone)."""

    organization_id: str
    rows: int
    head_seq: int
    head_hash: str
    broken_id: str | None = None
    broken_seq: int | None = None
    problem: str | None = None


def _missing(first: int, last: int) -> str:
    return f"row {first} is missing" if first == last else f"rows {first} to {last} are missing"


async def verify_chain(conn: Conn, organization_id: str) -> ChainReport:
    """Walk one chain from its start (or retention's anchor) to its head, as of one moment;
    stop at the first row whose position, link or hash is wrong, or past the head, and
    name the rows removed from the end. Runs as the owner, across organizations."""
    org = {"organization_id": organization_id}
    async with conn.transaction():
        await conn.execute(queries["audit_snapshot"], {})
        anchor = await (await conn.execute(queries["audit_anchor"], org)).fetchone()
        head = await (await conn.execute(queries["audit_head"], org)).fetchone()
        assert head is not None
        head_seq, head_hash = head["seq"], head["hash"] or ZERO_HASH
        seq, prev = (anchor["seq"], anchor["hash"]) if anchor else (0, ZERO_HASH)
        last_id: str | None = None
        checked = 0

        def broken(row_id: str | None, row_seq: int, problem: str) -> ChainReport:
            return ChainReport(
                organization_id, checked, head_seq, head_hash, row_id, row_seq, problem
            )

        while True:
            cur = await conn.execute(
                queries["audit_chain_page"], {**org, "after": seq, "limit": _PAGE}
            )
            rows = await cur.fetchall()
            for row in rows:
                problem = None
                if row["seq"] != seq + 1:
                    problem = _missing(seq + 1, row["seq"] - 1)
                elif row["prev_hash"] != prev:
                    problem = "its prev_hash is not the previous row's hash"
                elif row["hash"] != chain_hash(row["prev_hash"], row):
                    problem = "its hash does not match its content"
                elif row["seq"] > head_seq:
                    problem = f"it is past the chain's head (row {head_seq})"
                if problem:
                    return broken(row["id"], row["seq"], problem)
                seq, prev, last_id = row["seq"], row["hash"], row["id"]
                checked += 1
            if len(rows) < _PAGE:
                break
    if seq < head_seq:
        problem = f"rows removed from the end: {_missing(seq + 1, head_seq)}"
        return broken(None, seq + 1, f"{problem} (the head is row {head_seq})")
    if prev != head_hash:
        return broken(last_id, seq, "its hash is not the chain head's")
    return ChainReport(organization_id, checked, head_seq, head_hash)


async def verify_chains(conn: Conn) -> list[ChainReport]:
    """Every organization's chain, verified (the operator's `postbag audit verify`)."""
    cur = await conn.execute(queries["audited_organizations"], {})
    return [await verify_chain(conn, row["id"]) for row in await cur.fetchall()]
