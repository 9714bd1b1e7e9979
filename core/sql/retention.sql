-- name: lock_expired_submissions
-- A batch of submissions past `erase_at` and not yet erased, locked for this transaction
-- (rows another retention pass holds are skipped, so passes on several machines share work).
SELECT id FROM submissions
 WHERE erased_at IS NULL AND erase_at <= %(now)s
 ORDER BY erase_at
 LIMIT %(limit)s
   FOR UPDATE SKIP LOCKED

-- name: mark_orphans
-- Stored objects no attachment row refers to (their submit's transaction failed), older
-- than the grace period: schedule them for deletion.
UPDATE stored_objects o
   SET delete_after = %(now)s
 WHERE o.deleted_at IS NULL AND o.delete_after IS NULL AND o.created_at < %(older_than)s
   AND NOT EXISTS (SELECT 1 FROM attachments a WHERE a.storage_key = o.storage_key)
RETURNING storage_key

-- name: claim_object_deletions
-- Stored objects due for deletion with attempts left, leased to this pass (`delete_after`
-- moves forward, so a concurrent pass does not take them too).
UPDATE stored_objects o
   SET delete_after = %(now)s + %(lease)s
  FROM (SELECT storage_key FROM stored_objects
         WHERE deleted_at IS NULL AND delete_after <= %(now)s
           AND delete_attempts < %(max_attempts)s
         ORDER BY delete_after
         LIMIT %(limit)s
           FOR UPDATE SKIP LOCKED) due
 WHERE o.storage_key = due.storage_key
RETURNING o.storage_key, o.organization_id

-- name: observed_forms
-- A page of live `observe` forms (by id, after a cursor) with accepted submissions newer
-- than their latest schema version and than inference's last read of them.
SELECT f.id, f.organization_id, o.plan, v.version, v.schema, v.created_at AS version_at
  FROM forms f
  JOIN organizations o ON o.id = f.organization_id
  LEFT JOIN LATERAL (SELECT version, schema, created_at FROM form_schemas
                      WHERE form_id = f.id ORDER BY version DESC LIMIT 1) v ON true
  LEFT JOIN schema_inference i ON i.form_id = f.id
 WHERE f.schema_mode = 'observe' AND f.deleted_at IS NULL
   AND (%(after)s::text IS NULL OR f.id > %(after)s::text)
   AND EXISTS (SELECT 1 FROM submissions s
                WHERE s.form_id = f.id AND s.status = 'accepted' AND s."values" IS NOT NULL
                  AND s.received_at > greatest(coalesce(v.created_at, '-infinity'),
                                               coalesce(i.scanned_through, '-infinity')))
 ORDER BY f.id
 LIMIT %(limit)s

-- name: observed_values
-- The values of a form's latest accepted submissions since its latest schema version.
SELECT "values", received_at FROM submissions
 WHERE form_id = %(form_id)s AND status = 'accepted' AND "values" IS NOT NULL
   AND NOT ('test' = ANY (flags))
   AND received_at > coalesce(%(since)s::timestamptz, '-infinity')
 ORDER BY received_at DESC
 LIMIT %(limit)s

-- name: mark_inference_scanned
-- Inference has read a form's submissions received up to `through`.
INSERT INTO schema_inference (form_id, organization_id, scanned_through)
VALUES (%(form_id)s, %(organization_id)s, %(through)s)
ON CONFLICT ON CONSTRAINT schema_inference_pkey DO UPDATE
    SET scanned_through = greatest(schema_inference.scanned_through, excluded.scanned_through)

-- name: append_suggested_schema
-- Append a suggested schema version after `version` and its `schema.suggested` event; a
-- concurrent pass that appended first makes this a no-op.
WITH added AS (
    INSERT INTO form_schemas (organization_id, form_id, version, schema, source, created_at)
    VALUES (%(organization_id)s, %(form_id)s, %(version)s, %(schema)s, 'suggested', %(now)s)
    ON CONFLICT ON CONSTRAINT form_schemas_form_version_key DO NOTHING
    RETURNING version
), event AS (
    INSERT INTO events (organization_id, type, subject_id, data, created_at)
    SELECT %(organization_id)s, 'schema.suggested', %(form_id)s,
           jsonb_build_object('form', %(form_id)s::text, 'version', added.version), %(now)s
      FROM added
)
SELECT version FROM added

-- name: roll_up_destination_health
-- Each live destination's success rate and p95 send duration over the last 24 hours of
-- attempts (fenced answers left out), stored in `health_stats`; at most every 5 minutes
-- per destination, so a pass a minute does not rewrite every destination row.
UPDATE destinations d
   SET health_stats = jsonb_build_object(
           'window_hours', 24,
           'attempts', coalesce(s.attempts, 0),
           'success_rate', s.success_rate,
           'p95_duration_ms', s.p95_duration_ms,
           'computed_at', %(now)s::timestamptz)
  FROM destinations d2
  LEFT JOIN (
        SELECT dl.destination_id, count(*) AS attempts,
               round(avg((a.outcome = 'sent')::int)::numeric, 4) AS success_rate,
               round(percentile_cont(0.95) WITHIN GROUP (ORDER BY a.duration_ms)::numeric)
                   AS p95_duration_ms
          FROM delivery_attempts a
          JOIN deliveries dl ON dl.id = a.delivery_id
         WHERE a.started_at > %(now)s - interval '24 hours' AND a.started_at <= %(now)s
           AND a.outcome <> 'fenced' AND dl.destination_id IS NOT NULL
         GROUP BY dl.destination_id) s ON s.destination_id = d2.id
 WHERE d.id = d2.id AND d2.deleted_at IS NULL
   AND (d2.health_stats IS NULL
        OR (d2.health_stats ->> 'computed_at')::timestamptz <= %(now)s - interval '5 minutes')

-- name: add_history_week
-- The week starting at `week_start` as a partition of `parent`, unless one covers it (the
-- function is in migrations/0061_weekly_history.sql, as 0067 made it); true when it was
-- created.
SELECT history_week_add(%(parent)s, %(week_start)s) AS changed

-- name: history_partitions_past
-- The dated history partitions whose every row started before `before`, oldest first.
SELECT name FROM history_partitions
 WHERE parent IN ('events', 'delivery_attempts') AND range_end <= %(before)s
 ORDER BY range_end, name

-- name: submission_weeks_past
-- The weeks of submissions that ended by `now` whose every row is erased and past its
-- erase time (the function is in migrations/0067_weekly_submissions.sql), oldest first.
SELECT name FROM history_partitions
 WHERE parent = 'submissions' AND range_end <= %(now)s
   AND submissions_week_expired(name, %(now)s)
 ORDER BY range_end, name

-- name: history_lock_timeout
-- How long attaching or dropping a partition waits for a reader of its table before the
-- next tick tries.
SET LOCAL lock_timeout = '1s'

-- name: drop_history_partition
-- Detach and drop one dated partition, after the rows of other tables that reference its
-- rows.
SELECT history_partition_drop(%(name)s) AS dropped

-- name: prune_history_leftovers
-- Up to `limit` rows of `parent` older than `before` deleted from its legacy and default
-- partitions (the rows no dated partition holds); the number deleted.
SELECT history_prune_leftovers(%(parent)s, %(before)s, %(limit)s) AS deleted

-- name: prune_notifications
-- Up to `limit` handled owner's notices written before `before` (the history period).
DELETE FROM notifications
 WHERE id IN (SELECT id FROM notifications
               WHERE handled_at IS NOT NULL AND created_at < %(before)s
               ORDER BY id LIMIT %(limit)s FOR UPDATE SKIP LOCKED)

-- name: prune_schema_drift
-- Up to `limit` drift rows of hours before `before`, deleted (the drift summary's period).
DELETE FROM schema_drift
 WHERE (form_id, hour, path, keyword) IN (
        SELECT form_id, hour, path, keyword FROM schema_drift
         WHERE hour < %(before)s ORDER BY hour LIMIT %(limit)s)

-- name: prune_spam_fingerprints
-- Up to `limit` duplicate fingerprints whose window started before `before` (the longest
-- window ago), deleted.
DELETE FROM spam_fingerprints
 WHERE (form_id, fingerprint) IN (
        SELECT form_id, fingerprint FROM spam_fingerprints
         WHERE window_start < %(before)s ORDER BY window_start LIMIT %(limit)s)

-- name: prune_acknowledgement_counts
-- Up to `limit` per-address acknowledgement counts of UTC days before `before`'s deleted:
-- only today's count caps anything.
DELETE FROM acknowledgement_counts
 WHERE (recipient_hash, day) IN (
       SELECT recipient_hash, day FROM acknowledgement_counts
        WHERE day < (%(before)s AT TIME ZONE 'UTC')::date
        LIMIT %(limit)s FOR UPDATE SKIP LOCKED)

-- name: prune_autoresponse_counts
-- Up to `limit` per-mailbox autoresponse counts of UTC days before `before`'s deleted.
DELETE FROM autoresponse_counts
 WHERE (scope, recipient_hash, day) IN (
       SELECT scope, recipient_hash, day FROM autoresponse_counts
        WHERE day < (%(before)s AT TIME ZONE 'UTC')::date
        LIMIT %(limit)s FOR UPDATE SKIP LOCKED)

-- name: prune_reset_counts
-- Up to `limit` counts of password resets whose window started before `before` (it has
-- ended: the next request starts a new one) deleted.
DELETE FROM reset_counts
 WHERE recipient_hash IN (
       SELECT recipient_hash FROM reset_counts WHERE window_start < %(before)s
        LIMIT %(limit)s FOR UPDATE SKIP LOCKED)

-- name: prune_heartbeats
-- Up to `limit` heartbeats whose last pass ended before `before`, deleted.
DELETE FROM worker_heartbeats
 WHERE (worker_id, tick) IN (
       SELECT worker_id, tick FROM worker_heartbeats WHERE last_beat_at < %(before)s
        LIMIT %(limit)s FOR UPDATE SKIP LOCKED)

-- name: prune_invitations
-- Up to `limit` invitations that expired before `before`, deleted: pending, accepted or
-- withdrawn alike (7 days after it was sent, none counts toward the daily bounds).
DELETE FROM invitations
 WHERE id IN (SELECT id FROM invitations WHERE expires_at < %(before)s
               LIMIT %(limit)s FOR UPDATE SKIP LOCKED)
