-- name: list_submissions
-- One page of an organization's submissions, newest first, without values. With the
-- `recent` part, only those whose ids sort from %(recent_id)s on: PostgreSQL then reads
-- those weeks of submissions alone (core/submissions/records.py tries it first).
SELECT id, form_id, status, reason, flags, received_at, erase_at, erased_at
  FROM submissions
 WHERE organization_id = %(organization_id)s
   AND (%(form_id)s::text IS NULL OR form_id = %(form_id)s::text)
   AND (%(status)s::text IS NULL OR status = %(status)s::text)
   AND (%(flag)s::text IS NULL OR %(flag)s::text = ANY(flags))
   AND (%(since)s::timestamptz IS NULL OR received_at >= %(since)s::timestamptz)
   AND (%(before_at)s::timestamptz IS NULL
        OR (received_at, id) < (%(before_at)s::timestamptz, %(before_id)s::text))
-- if recent
   AND id >= %(recent_id)s::text
-- end recent
 ORDER BY received_at DESC, id DESC
 LIMIT %(limit)s

-- name: search_submissions
-- The same page of those whose readable values hold the anchor and the other terms and none
-- of the excluded ones (ILIKE patterns; the function is 0059_substring_search.sql's).
SELECT id, form_id, status, reason, flags, received_at, erase_at, erased_at
  FROM search_submissions(%(anchor)s, %(others)s, %(excluded)s, %(now)s, %(form_id)s,
                          %(status)s, %(flag)s, %(since)s, %(before_at)s, %(before_id)s,
                          %(limit)s)

-- name: search_time_bound
-- How long a search may take, for the rest of its transaction.
SELECT set_config('statement_timeout', %(timeout)s, true)

-- name: get_submission
-- One submission with its attachments, one line per delivery, and its history (its own
-- events: received or quarantined, released, marked as spam, erased).
SELECT s.id, s.form_id, s.status, s.reason, s.flags, s.received_at, s.erase_at, s.erased_at,
       s.erase_reason, s."values", s.field_order, s.released_at, s.spam_score,
       (SELECT f.labels FROM forms f WHERE f.id = s.form_id) AS form_labels,
       coalesce((SELECT jsonb_agg(jsonb_build_object(
                            'type', e.type, 'at', e.created_at, 'data', e.data) ORDER BY e.id)
                   FROM events e
                  WHERE e.subject_id = s.id AND e.organization_id = s.organization_id
                    AND e.type LIKE 'submission.%%'), '[]'::jsonb) AS history,
       coalesce((SELECT jsonb_agg(jsonb_build_object(
                            'id', a.id, 'field', a.field, 'name', a.name,
                            'type', a.content_type, 'size', a.size) ORDER BY a.id)
                   FROM attachments a WHERE a.submission_id = s.id), '[]'::jsonb) AS attachments,
       coalesce((SELECT jsonb_agg(jsonb_build_object(
                            'id', d.id, 'kind', d.kind, 'channel', d.channel,
                            'destination', d.destination_id, 'route', d.route_id,
                            'status', d.status, 'reason', d.reason, 'held', d.held,
                            'attempts', d.attempts, 'next_attempt_at', d.next_attempt_at,
                            'last_detail', d.last_detail, 'target', d.target) ORDER BY d.id)
                   FROM deliveries d WHERE d.submission_id = s.id), '[]'::jsonb) AS deliveries
  FROM submissions s
 WHERE s.id = %(id)s AND s.organization_id = %(organization_id)s

-- name: lock_submission
-- The submission to erase, locked against a concurrent erase or retention pass.
SELECT id, erased_at FROM submissions
 WHERE id = %(id)s AND organization_id = %(organization_id)s
   FOR UPDATE

-- name: submission_state
-- Whether a submission exists in the organization, and whether it was erased.
SELECT id, erased_at FROM submissions
 WHERE id = %(id)s AND organization_id = %(organization_id)s

-- name: erase_submission_values
-- Drop the values of not-yet-erased submissions, the field names the visitor posted and
-- the labels and consent kept for their deliveries (keeping the receipt, idempotency key
-- and payload hash); returns the ones erased now. A submission's deliveries hold no copy
-- of its values: their bodies are built from this row.
UPDATE submissions
   SET "values" = NULL, field_order = NULL, meta = jsonb_build_object('origin', meta -> 'origin'),
       form_snapshot = NULL,
       erased_at = %(now)s, erase_reason = %(erase_reason)s
 WHERE id = ANY (%(ids)s::text[]) AND erased_at IS NULL
RETURNING id, organization_id, form_id, received_at

-- name: skip_erased_deliveries
-- End the submissions' unsent deliveries as skipped (`values_erased` or `values_expired`).
UPDATE deliveries
   SET status = 'skipped', reason = %(skip_reason)s, held = false, updated_at = %(now)s
 WHERE submission_id = ANY (%(ids)s::text[]) AND status IN ('pending', 'failed')
RETURNING id, status

-- name: erase_digest_snapshots
-- Drop the values of these submissions from the digests that listed them (a digest lists a
-- submission of its route's form received within its period).
UPDATE deliveries d
   SET payload = jsonb_set(d.payload, '{submissions}', (
           SELECT coalesce(jsonb_agg(CASE WHEN item ->> 'receipt' = ANY (%(ids)s::text[])
                                          THEN item - 'values' ELSE item END ORDER BY n),
                           '[]'::jsonb)
             FROM jsonb_array_elements(d.payload -> 'submissions') WITH ORDINALITY AS x(item, n))),
       updated_at = %(now)s
  FROM digests g
 WHERE d.digest_id = g.id AND d.kind = 'digest'
   AND g.id IN (SELECT g2.id
                  FROM submissions s
                  JOIN routes r ON r.form_id = s.form_id
                  JOIN digests g2 ON g2.route_id = r.id
                   AND s.received_at >= g2.period_start AND s.received_at < g2.period_end
                 WHERE s.id = ANY (%(ids)s::text[]))
   AND jsonb_typeof(d.payload -> 'submissions') = 'array'

-- name: erase_delivery_traces
-- Scrub what the submissions' deliveries (and the digests that listed them) kept of the
-- receivers' answers, which may echo values: attempt excerpts go; a service's error text
-- after an HTTP status (`http_400: …`) goes from the reason, the last detail, the
-- `delivery.*` events and the alert the delivery raised; an acknowledgement or an
-- autoresponse forgets its recipient address (and its mailbox's hash).
WITH touched AS (
    SELECT id FROM deliveries WHERE submission_id = ANY (%(ids)s::text[])
    UNION
    SELECT d.id
      FROM submissions s
      JOIN routes r ON r.form_id = s.form_id
      JOIN digests g ON g.route_id = r.id
       AND s.received_at >= g.period_start AND s.received_at < g.period_end
      JOIN deliveries d ON d.digest_id = g.id
     WHERE s.id = ANY (%(ids)s::text[])
), delivery AS (
    UPDATE deliveries d
       SET reason = regexp_replace(d.reason, '(http_[0-9]{3}): .*?(\)?)$', '\1\2'),
           last_detail = regexp_replace(d.last_detail, '(http_[0-9]{3}): .*?(\)?)$', '\1\2'),
           target = CASE WHEN d.kind IN ('acknowledgement', 'autoresponse')
                         THEN jsonb_build_object('to', '[]'::jsonb) ELSE d.target END,
           template = CASE WHEN d.kind = 'autoresponse' THEN d.template - 'unsubscribe'
                           ELSE d.template END
      FROM touched t
     WHERE d.id = t.id
), attempt AS (
    UPDATE delivery_attempts a SET response_excerpt = NULL
      FROM touched t
     WHERE a.delivery_id = t.id AND a.response_excerpt IS NOT NULL
), event AS (
    UPDATE events e
       SET data = jsonb_set(e.data, '{reason}', to_jsonb(
               regexp_replace(e.data ->> 'reason', '(http_[0-9]{3}): .*?(\)?)$', '\1\2')))
      FROM touched t
     WHERE e.subject_id = t.id AND starts_with(e.type, 'delivery.')
       AND jsonb_typeof(e.data -> 'reason') = 'string'
)
UPDATE alerts a
   SET detail = regexp_replace(a.detail, '(http_[0-9]{3}): .*?(\)?)$', '\1\2')
  FROM touched t
 WHERE a.last_delivery_id = t.id

-- name: erase_attachments
-- Forget the submissions' attachments and mark their stored objects for deletion.
WITH gone AS (
    DELETE FROM attachments WHERE submission_id = ANY (%(ids)s::text[]) RETURNING storage_key
)
UPDATE stored_objects SET delete_after = %(now)s
 WHERE submission_id = ANY (%(ids)s::text[]) AND deleted_at IS NULL
RETURNING storage_key, submission_id

-- name: insert_erased_events
-- One `submission.erased` event per submission erased now.
INSERT INTO events (organization_id, type, subject_id, data, created_at)
SELECT e.organization_id, 'submission.erased', e.id,
       jsonb_build_object('reason', %(erase_reason)s::text, 'files', e.files), %(now)s
  FROM jsonb_to_recordset(%(erased)s::jsonb) AS e(id text, organization_id text, files int)

-- name: mark_object_deleted
-- A stored object whose bytes are gone.
UPDATE stored_objects SET deleted_at = %(now)s, last_error = NULL
 WHERE storage_key = %(storage_key)s

-- name: mark_object_delete_failed
-- A deletion that failed; the retention tick retries it.
UPDATE stored_objects
   SET delete_attempts = delete_attempts + 1, last_error = left(%(error)s, 500),
       delete_after = %(now)s
 WHERE storage_key = %(storage_key)s
RETURNING organization_id, submission_id, delete_attempts

-- name: get_attachment
-- One attachment of a submission, with what decides whether it may still be read.
SELECT a.id, a.name, a.content_type, a.size, a.storage_key, s.erased_at, s.erase_at
  FROM attachments a
  JOIN submissions s ON s.id = a.submission_id
 WHERE a.id = %(attachment_id)s AND a.submission_id = %(id)s
   AND s.organization_id = %(organization_id)s

-- name: form_exists
-- Whether the organization has this form (deleted ones included: their data stays).
SELECT 1 FROM forms WHERE id = %(form_id)s AND organization_id = %(organization_id)s

-- name: export_fields
-- The first `limit` field names seen in the form's readable submissions, in first-seen
-- order: by arrival, then each submission's field order (rows stored before it was kept:
-- names alphabetically).
SELECT key
  FROM (SELECT DISTINCT ON (k.key) k.key, s.received_at, s.id, k.n
          FROM submissions s,
               unnest(coalesce(s.field_order,
                               ARRAY(SELECT jsonb_object_keys(s."values") ORDER BY 1)))
                   WITH ORDINALITY AS k(key, n)
         WHERE s.form_id = %(form_id)s AND s.organization_id = %(organization_id)s
           AND s."values" IS NOT NULL AND (s.erase_at IS NULL OR s.erase_at > %(now)s)
         ORDER BY k.key, s.received_at, s.id, k.n) AS first_seen
 ORDER BY received_at, id, n
 LIMIT %(limit)s

-- name: export_declared_fields
-- The fields a form declares: its labels in their declared order, then its latest schema's
-- properties, then its file fields (each in the database's key order).
SELECT k.key
  FROM forms f
  LEFT JOIN LATERAL (
        SELECT fs.schema -> 'properties' AS properties
          FROM form_schemas fs
         WHERE fs.form_id = f.id AND fs.organization_id = f.organization_id
         ORDER BY fs.version DESC
         LIMIT 1
       ) latest ON true
 CROSS JOIN LATERAL (
        SELECT l.key, 1 AS part, l.n FROM json_object_keys(f.labels) WITH ORDINALITY AS l(key, n)
        UNION ALL
        SELECT p.key, 2, p.n
          FROM jsonb_object_keys(CASE WHEN jsonb_typeof(latest.properties) = 'object'
                                      THEN latest.properties ELSE '{}' END)
               WITH ORDINALITY AS p(key, n)
        UNION ALL
        SELECT ff.key, 3, ff.n FROM jsonb_object_keys(f.file_fields) WITH ORDINALITY AS ff(key, n)
       ) k
 WHERE f.id = %(form_id)s AND f.organization_id = %(organization_id)s
 ORDER BY k.part, k.n

-- name: export_page
-- One page of the form's CSV export, oldest first: the submissions after the keyset
-- (`after_at`, `after_id`) received by `until` (the export's start), at most `limit` rows
-- and, past the first, no more than `max_bytes` of values (values only while readable, as
-- JSON text: the export decodes them in its worker thread, off the event loop).
WITH page AS (
    SELECT id, status, reason, flags, received_at,
           CASE WHEN erase_at IS NULL OR erase_at > %(now)s THEN "values"::text END AS "values"
      FROM submissions
     WHERE form_id = %(form_id)s AND organization_id = %(organization_id)s
       AND received_at <= %(until)s
       AND (received_at, id) > (%(after_at)s, %(after_id)s)
     ORDER BY received_at, id
     LIMIT %(limit)s
), sized AS (
    SELECT page.*,
           sum(coalesce(octet_length("values"), 0)) OVER (ORDER BY received_at, id)
             - coalesce(octet_length("values"), 0) AS bytes_before
      FROM page
)
SELECT id, status, reason, flags, received_at, "values"
  FROM sized
 WHERE bytes_before < %(max_bytes)s
 ORDER BY received_at, id

-- name: export_after
-- Where an export resumes: the arrival of the form's submission `id` (none: not this form's).
SELECT received_at
  FROM submissions
 WHERE id = %(id)s AND form_id = %(form_id)s AND organization_id = %(organization_id)s
