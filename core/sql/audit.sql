-- name: lock_audit_chain
-- Serialise the appends to one organization's chain until the transaction ends (the head
-- is read by the next statement, with a snapshot taken after the lock).
SELECT pg_advisory_xact_lock(hashtextextended('postbag.audit:' || %(organization_id)s, 0))

-- name: audit_head
-- The chain's head, the newest row ever appended (kept by the insert trigger; else the
-- anchor, else the start), and the time the next row gets.
SELECT coalesce(h.seq, a.seq, 0) AS seq, coalesce(h.hash, a.hash) AS hash,
       clock_timestamp() AS now
  FROM (SELECT 1) one
  LEFT JOIN audit_heads h ON h.organization_id = %(organization_id)s
  LEFT JOIN audit_anchors a ON a.organization_id = %(organization_id)s

-- name: insert_audit_row
-- Append one row to the organization's chain.
INSERT INTO audit_log (id, organization_id, seq, at, actor_kind, actor_id, actor_name, action,
                       subject, via, ip, user_agent, changed, prev_hash, hash)
VALUES (%(id)s, %(organization_id)s, %(seq)s, %(at)s, %(actor_kind)s, %(actor_id)s,
        %(actor_name)s, %(action)s, %(subject)s, %(via)s, %(ip)s, %(user_agent)s,
        %(changed)s, %(prev_hash)s, %(hash)s)

-- name: recent_read
-- Whether the actor's read of this object is already recorded within the window (the
-- append lock is held: a concurrent read of it waits, then finds this one).
SELECT 1 AS found
  FROM audit_log
 WHERE organization_id = %(organization_id)s AND at > clock_timestamp() - %(window)s
   AND actor_kind = %(actor_kind)s AND actor_id = %(actor_id)s
   AND action = %(action)s AND subject = %(subject)s
 LIMIT 1

-- name: list_audit
-- One page of the organization's audit rows, newest first, before a seq, filtered.
SELECT id, seq, at, actor_kind, actor_id, actor_name, action, subject, via, ip, user_agent,
       changed, prev_hash, hash
  FROM audit_log
 WHERE organization_id = %(organization_id)s
   AND (%(actor)s::text IS NULL OR actor_id = %(actor)s OR actor_name = %(actor)s)
   AND (%(action)s::text IS NULL OR action = %(action)s)
   AND (%(subject)s::text IS NULL OR subject = %(subject)s)
   AND (%(since)s::timestamptz IS NULL OR at >= %(since)s)
   AND (%(before)s::bigint IS NULL OR seq < %(before)s)
 ORDER BY seq DESC
 LIMIT %(limit)s

-- name: audit_snapshot
-- The first statement of a verifying transaction: the chain and its head as of one moment.
SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY

-- name: audited_organizations
-- Every organization with an audit chain, an anchor or a head (the operator's `audit verify`).
SELECT id FROM organizations o
 WHERE EXISTS (SELECT 1 FROM audit_log l WHERE l.organization_id = o.id)
    OR EXISTS (SELECT 1 FROM audit_anchors a WHERE a.organization_id = o.id)
    OR EXISTS (SELECT 1 FROM audit_heads h WHERE h.organization_id = o.id)
 ORDER BY id

-- name: audit_anchor
-- Where an organization's chain starts after retention (none: at seq 0, the zero hash).
SELECT seq, hash FROM audit_anchors WHERE organization_id = %(organization_id)s

-- name: audit_chain_page
-- One organization's rows in chain order, after a seq (the operator's `audit verify`).
SELECT id, organization_id, seq, at, actor_kind, actor_id, actor_name, action, subject, via,
       ip, user_agent, changed, prev_hash, hash
  FROM audit_log
 WHERE organization_id = %(organization_id)s AND seq > %(after)s
 ORDER BY seq
 LIMIT %(limit)s

-- name: audit_export_page
-- One page of the organization's rows in chain order, after a seq, within [since, until)
-- (`GET /v1/audit/export`).
SELECT id, organization_id, seq, at, actor_kind, actor_id, actor_name, action, subject, via,
       ip, user_agent, prev_hash, hash
  FROM audit_log
 WHERE organization_id = %(organization_id)s AND seq > %(after)s
   AND (%(since)s::timestamptz IS NULL OR at >= %(since)s)
   AND (%(until)s::timestamptz IS NULL OR at < %(until)s)
 ORDER BY seq
 LIMIT %(limit)s

-- name: audit_exports_due
-- Organizations whose chain has rows after their last exported one from a day already over
-- (the scheduled export), with how far it went.
SELECT h.organization_id, e.last_seq, e.last_hash
  FROM audit_heads h
  LEFT JOIN audit_exports e ON e.organization_id = h.organization_id
 WHERE h.seq > coalesce(e.last_seq, 0)
   AND (SELECT l.at FROM audit_log l
         WHERE l.organization_id = h.organization_id AND l.seq > coalesce(e.last_seq, 0)
         ORDER BY l.seq LIMIT 1) < %(today)s
 ORDER BY h.organization_id
 LIMIT %(limit)s

-- name: record_audit_export
-- How far an organization's chain is now exported (only ever forward).
INSERT INTO audit_exports (organization_id, day, last_seq, last_hash, last_at, exported_at)
VALUES (%(organization_id)s, %(day)s, %(last_seq)s, %(last_hash)s, %(last_at)s, %(now)s)
ON CONFLICT (organization_id) DO UPDATE
   SET day = EXCLUDED.day, last_seq = EXCLUDED.last_seq, last_hash = EXCLUDED.last_hash,
       last_at = EXCLUDED.last_at, exported_at = EXCLUDED.exported_at
 WHERE audit_exports.last_seq < EXCLUDED.last_seq

-- name: audit_retention_due
-- Organizations whose oldest audit row is older than `oldest` (the shortest retention of
-- any plan), with their plan and how far their chain is exported.
SELECT o.id, o.plan, e.last_at AS exported_through
  FROM organizations o
  LEFT JOIN audit_exports e ON e.organization_id = o.id
 WHERE (SELECT l.at FROM audit_log l WHERE l.organization_id = o.id
         ORDER BY l.seq LIMIT 1) < %(oldest)s
 ORDER BY o.id

-- name: audit_forget_before
-- Retention: forget the organization's rows older than `before`, leaving the anchor.
SELECT audit_forget_before(%(organization_id)s, %(before)s) AS forgotten
