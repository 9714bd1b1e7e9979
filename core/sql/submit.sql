-- name: resolve_form
-- The live form a public submit names, with what the submit path needs in one round trip:
-- its organization's plan and month usage, its current schema (the latest the owner wrote,
-- else the latest suggestion), the matching live immediate
-- routes with their destinations, and how many submissions this client sent in the window.
SELECT f.id, f.organization_id, f.name, f.accepting, f.allowed_origins, f.honeypot_field,
       f.redirect_url, f.retention_days, f.rate_limit_max, f.rate_limit_per_seconds,
       f.schema_mode, f.labels, f.file_fields, f.turnstile_secret, f.consent_field,
       f.ack_email, f.autoresponse, f.spam, f.spam_secrets, f.revision, o.plan,
       s.version AS schema_version, s.schema, s.source AS schema_source,
       coalesce((SELECT sum(u.submissions) FROM usage_counters u
                  WHERE u.organization_id = f.organization_id AND u.month = %(month)s), 0)
           AS month_submissions,
       (SELECT count(*) FROM (
            SELECT 1 FROM submissions c
             WHERE c.form_id = f.id AND c.client_hash = %(client_hash)s
               AND c.received_at > %(now)s - make_interval(secs => f.rate_limit_per_seconds)
             LIMIT f.rate_limit_max) recent) AS recent_from_client,
       coalesce((SELECT jsonb_agg(jsonb_build_object(
                            'route_id', r.id, 'destination_id', d.id,
                            'include_statuses', r.include_statuses,
                            'template', r.template) ORDER BY r.id)
                   FROM routes r
                   JOIN destinations d
                     ON d.id = r.destination_id AND d.organization_id = r.organization_id
                  WHERE r.form_id = f.id AND r.enabled AND r.deleted_at IS NULL
                    AND r.mode = 'immediate' AND d.deleted_at IS NULL), '[]'::jsonb) AS routes
  FROM forms f
  JOIN organizations o ON o.id = f.organization_id
  LEFT JOIN LATERAL (SELECT version, schema, source FROM form_schemas
                      WHERE form_id = f.id
                      ORDER BY source = 'manual' DESC, version DESC LIMIT 1) s ON true
 WHERE f.id = %(form_id)s AND f.deleted_at IS NULL

-- name: find_previous_submission
-- The submission an idempotency key (or, without one, the same client and payload within
-- the last 60 seconds) already produced, if any.
SELECT s.id, s.payload_hash
  FROM submission_keys k
  JOIN submissions s ON s.id = k.submission_id AND s.organization_id = k.organization_id
 WHERE k.form_id = %(form_id)s AND k.idempotency_key = %(idempotency_key)s::text
UNION ALL
SELECT id, payload_hash
  FROM submissions
 WHERE form_id = %(form_id)s
   AND %(idempotency_key)s::text IS NULL AND idempotency_key IS NULL
   AND client_hash = %(client_hash)s AND payload_hash = %(payload_hash)s
   AND received_at > %(now)s - interval '60 seconds'

-- name: insert_submission
-- The submit transaction in one statement: unless the idempotency key (or, without one,
-- the same client and payload within 60 s) already produced a submission, insert it with
-- its attachments and the form's parts its deliveries send (`form_snapshot`), one delivery
-- per live matching route (its target, secret version and route template: the body is built
-- from the submission at send time, so the values are written once), the visitor's
-- acknowledgement email if one is due and under its daily cap, the form's autoresponse
-- (`skipped` when its address is suppressed or over its daily bounds), its events and the monthly
-- usage count (on one of its shards). The rate limit is counted here, under the lock of postbag_submit_gate
-- (migrations/0010): when the client is over it, the `limited_*` variant the caller
-- prepared is stored instead (quarantined, rate_limited). The post's duplicate fingerprints
-- are counted here too (docs/spam.md#duplicates): when one is over %(duplicate_max)s, the
-- `duplicate_*` variant is stored instead (spam, duplicate_content). With %(form_revision)s (the form
-- came from the process's cache: core/intake/form.py), nothing is stored unless the form is
-- still at that revision (0018) and its organization's month count still puts the
-- submission on the side of the quota the caller assumed (%(held)s); the statement then
-- answers one row with the status `stale`, a repeat included (its answer uses the form).
-- The parts between `-- if <part>` and `-- end <part>` are left out when the post has nothing
-- for them (`unused_parts` in core/intake/plan.py).
-- Returns the new submission with the status it got, or the previous one.
WITH fresh AS MATERIALIZED (
    SELECT %(form_revision)s::bigint IS NULL OR EXISTS (
        SELECT 1 FROM forms f
         WHERE f.id = %(form_id)s AND f.deleted_at IS NULL
           AND f.revision = %(form_revision)s::bigint
           AND (%(quota)s::integer IS NULL OR NOT %(counted)s
                OR (coalesce((SELECT sum(u.submissions) FROM usage_counters u
                               WHERE u.organization_id = %(organization_id)s
                                 AND u.month = %(month)s), 0) >= %(quota)s::integer)
                   = %(held)s)) AS current
), gate AS (
    -- The client's submissions in the window, counted up to the flood limit.
    SELECT g.recent, g.previous_id, g.previous_hash,
           %(rate_checked)s AND g.recent >= %(rate_limit_max)s AS limited,
           g.recent >= %(flood_max)s AS flooded
      FROM postbag_submit_gate(%(form_id)s, %(client_hash)s,
                               %(now)s - make_interval(secs => %(rate_limit_seconds)s::int),
                               %(flood_max)s::int, %(idempotency_key)s::text IS NULL,
                               %(payload_hash)s, %(now)s - interval '60 seconds') g
     WHERE (SELECT current FROM fresh)
), existing AS (
    -- At most one row: keys are unique per form, and key-less repeats within 60 s are
    -- folded into the first. With a key, the submission it produced (a concurrent one is
    -- caught by ON CONFLICT in `keyed` below); without one, what the gate found after its lock.
-- if keyed
    SELECT s.id, s.payload_hash
      FROM submission_keys k
      JOIN submissions s ON s.id = k.submission_id AND s.organization_id = k.organization_id
     WHERE k.form_id = %(form_id)s AND k.idempotency_key = %(idempotency_key)s::text
    UNION ALL
-- end keyed
    SELECT g.previous_id AS id, g.previous_hash AS payload_hash
      FROM gate g WHERE g.previous_id IS NOT NULL
), admitted AS (
    -- A new submission, unless the client's flood past the limit is refused (nothing stored).
    SELECT g.limited, g.limited OR %(for_review)s AS for_review
      FROM gate g
     WHERE NOT g.flooded AND NOT EXISTS (SELECT 1 FROM existing)
), fingerprint AS (
    -- The post's duplicate fingerprints counted, in their sorted order (concurrent posts
    -- lock them alike): a new one, or one whose window is over, starts a window at 1.
    INSERT INTO spam_fingerprints AS f (form_id, organization_id, fingerprint, window_start,
                                        count)
    SELECT %(form_id)s, %(organization_id)s, p.fingerprint, %(now)s, 1
      FROM admitted a
     CROSS JOIN unnest(%(fingerprints)s::bytea[]) WITH ORDINALITY AS p(fingerprint, n)
     WHERE NOT a.limited
     ORDER BY p.n
    ON CONFLICT ON CONSTRAINT spam_fingerprints_key DO UPDATE
       SET count = CASE WHEN f.window_start
                             <= %(now)s - make_interval(secs => %(duplicate_window)s::int)
                        THEN 1 ELSE least(f.count + 1, 1000000) END,
           window_start = CASE WHEN f.window_start
                                    <= %(now)s - make_interval(secs => %(duplicate_window)s::int)
                               THEN %(now)s ELSE f.window_start END
    RETURNING count
), judged AS (
    -- Rate-limited, or else a duplicate: the variant stored instead of the caller's.
    SELECT d.limited, d.duplicated, d.for_review OR d.duplicated AS for_review
      FROM (SELECT a.limited, a.for_review,
                   NOT a.limited AND coalesce((SELECT max(p.count) FROM fingerprint p)
                                              > %(duplicate_max)s::int, false) AS duplicated
              FROM admitted a) d
), review_room AS (
    -- A spam, quarantined or over-quota submission counts its values' bytes (as JSON text:
    -- what the visitor posted, at most the body limit) on shard 0 of the month, unless that
    -- takes the month past the plan's review bytes (no row then): the row lock makes
    -- concurrent ones count one after the other.
    INSERT INTO usage_counters AS u (organization_id, month, shard, review_bytes)
    SELECT %(organization_id)s, %(month)s, 0, b.bytes
      FROM judged a
     CROSS JOIN (SELECT octet_length(%(values)s::jsonb::text) AS bytes) b
     WHERE a.for_review AND b.bytes <= coalesce(%(review_bytes_max)s::bigint, b.bytes)
    ON CONFLICT (organization_id, month, shard) DO UPDATE
       SET review_bytes = u.review_bytes + excluded.review_bytes
     WHERE %(review_bytes_max)s::bigint IS NULL
        OR u.review_bytes + excluded.review_bytes <= %(review_bytes_max)s::bigint
    RETURNING 1
), stored AS (
    SELECT a.limited, a.duplicated FROM judged a
     WHERE NOT a.for_review OR EXISTS (SELECT 1 FROM review_room)
-- if keyed
), keyed AS (
    -- The idempotency key, unique per form across the weeks of submissions (0066): taken
    -- by this submission unless a concurrent one with the same key took it first.
    INSERT INTO submission_keys (form_id, idempotency_key, organization_id, submission_id)
    SELECT %(form_id)s, %(idempotency_key)s::text, %(organization_id)s, %(id)s
      FROM stored
    ON CONFLICT ON CONSTRAINT submission_keys_pkey DO NOTHING
    RETURNING 1
-- end keyed
), submission AS (
    INSERT INTO submissions (id, organization_id, form_id, status, reason, flags, "values",
                             field_order, meta, form_snapshot, idempotency_key, payload_hash,
                             client_hash, schema_version, received_at, erase_at, spam_score)
    SELECT %(id)s, %(organization_id)s, %(form_id)s,
           CASE WHEN g.limited THEN 'quarantined' WHEN g.duplicated THEN 'spam'
                ELSE %(status)s END,
           CASE WHEN g.limited THEN 'rate_limited' WHEN g.duplicated THEN 'duplicate_content'
                ELSE %(reason)s END,
           CASE WHEN g.limited OR g.duplicated THEN %(limited_flags)s::text[]
                ELSE %(flags)s::text[] END,
           %(values)s, %(field_order)s, %(meta)s, %(form_snapshot)s, %(idempotency_key)s,
           %(payload_hash)s,
           %(client_hash)s,
           %(schema_version)s, %(now)s,
           %(now)s + make_interval(days => CASE WHEN g.limited
                                                THEN %(limited_retention_days)s::int
                                                WHEN g.duplicated
                                                THEN %(duplicate_retention_days)s::int
                                                ELSE %(retention_days)s::int END),
           CASE WHEN g.limited OR g.duplicated THEN NULL ELSE %(spam_score)s::real END
      FROM stored g
-- if keyed
     WHERE EXISTS (SELECT 1 FROM keyed)
-- end keyed
    RETURNING id, status, reason
-- if ham
), ham AS (
    -- When it teaches the learned filter "not spam" unless marked first (implicit ham,
    -- docs/spam.md#implicit-ham): the stored variant of an accepted post only.
    INSERT INTO ham_due (submission_id, organization_id, due_at)
    SELECT s.id, %(organization_id)s, %(ham_due_at)s::timestamptz
      FROM submission s CROSS JOIN stored g
     WHERE %(ham_due_at)s::timestamptz IS NOT NULL AND NOT g.limited AND NOT g.duplicated
-- end ham
-- if attachments
), attachment AS (
    INSERT INTO attachments (id, organization_id, submission_id, field, name, content_type,
                             size, sha256, storage_key)
    SELECT a.id, %(organization_id)s, s.id, a.field, a.name, a.content_type, a.size,
           decode(a.sha256, 'hex'), a.storage_key
      FROM submission s,
           jsonb_to_recordset(%(attachments)s::jsonb) AS a(id text, field text, name text,
               content_type text, size bigint, sha256 text, storage_key text)
-- end attachments
), delivery AS (
    INSERT INTO deliveries (id, organization_id, kind, submission_id, route_id, destination_id,
                            channel, held, max_attempts, next_attempt_at, target, template,
                            secret_version)
    SELECT p.id, %(organization_id)s, 'submission', s.id, r.id, d.id, d.type,
           %(held)s AND NOT g.limited AND NOT g.duplicated, t.max_attempts, %(now)s, d.config,
           p.template,
           (SELECT max(v.version) FROM destination_secrets v WHERE v.destination_id = d.id)
      FROM submission s
     CROSS JOIN stored g
     CROSS JOIN jsonb_to_recordset(CASE WHEN g.limited THEN %(limited_deliveries)s::jsonb
                                        WHEN g.duplicated THEN %(duplicate_deliveries)s::jsonb
                                        ELSE %(deliveries)s::jsonb END)
           AS p(id text, route_id text, template jsonb)
      JOIN routes r ON r.id = p.route_id AND r.enabled AND r.deleted_at IS NULL
      JOIN destinations d
        ON d.id = r.destination_id AND d.organization_id = r.organization_id
       AND d.deleted_at IS NULL
      JOIN destination_types t ON t.name = d.type
    RETURNING id
-- if acknowledgement
), stale_acknowledgement_count AS (
    DELETE FROM acknowledgement_counts
     WHERE recipient_hash = %(ack_recipient_hash)s::bytea AND day < %(today)s::date
), acknowledgement_quota AS (
    -- One more acknowledgement to this address today, unless its cap is reached: a
    -- concurrent submit to the same address waits for this row and re-checks the cap.
    INSERT INTO acknowledgement_counts AS c (recipient_hash, day, sent)
    SELECT %(ack_recipient_hash)s::bytea, %(today)s::date, 1
      FROM submission s CROSS JOIN stored g
     WHERE %(ack_recipient_hash)s::bytea IS NOT NULL AND NOT g.limited AND NOT g.duplicated
    ON CONFLICT (recipient_hash, day)
    DO UPDATE SET sent = c.sent + 1 WHERE c.sent < %(ack_daily_max)s
    RETURNING 1
), acknowledgement AS (
    -- The visitor's acknowledgement email (consent given, a valid address): no route, no
    -- destination; at most one per submission (deliveries_one_acknowledgement_idx).
    INSERT INTO deliveries (id, organization_id, kind, submission_id, channel, held,
                            max_attempts, next_attempt_at, target, template)
    SELECT a.id, %(organization_id)s, 'acknowledgement', s.id, t.name, %(held)s,
           t.max_attempts, %(now)s, a.target, a.template
      FROM submission s
     CROSS JOIN acknowledgement_quota q
     CROSS JOIN jsonb_to_recordset(%(acknowledgements)s::jsonb)
           AS a(id text, target jsonb, template jsonb)
      JOIN destination_types t ON t.name = 'email'
    RETURNING id
-- end acknowledgement
-- if autoresponse
), autoresponse_suppressed AS (
    SELECT EXISTS (SELECT 1 FROM email_suppressions
                    WHERE recipient_hash = %(ar_recipient_hash)s::bytea) AS suppressed
), autoresponse_organization AS (
    -- One more autoresponse to this mailbox today from this organization, unless its bound
    -- is reached: a concurrent submit to the same address waits for this row and re-checks.
    INSERT INTO autoresponse_counts AS c (scope, recipient_hash, day, sent)
    SELECT %(organization_id)s, %(ar_recipient_hash)s::bytea, %(today)s::date, 1
      FROM submission s CROSS JOIN stored g CROSS JOIN autoresponse_suppressed x
     WHERE %(ar_recipient_hash)s::bytea IS NOT NULL AND NOT g.limited AND NOT g.duplicated
       AND NOT x.suppressed
    ON CONFLICT (scope, recipient_hash, day)
    DO UPDATE SET sent = c.sent + 1 WHERE c.sent < %(ar_organization_max)s
    RETURNING 1
), autoresponse_installation AS (
    -- Then the installation's bound, across organizations (scope '').
    INSERT INTO autoresponse_counts AS c (scope, recipient_hash, day, sent)
    SELECT '', %(ar_recipient_hash)s::bytea, %(today)s::date, 1
      FROM autoresponse_organization
    ON CONFLICT (scope, recipient_hash, day)
    DO UPDATE SET sent = c.sent + 1 WHERE c.sent < %(ar_installation_max)s
    RETURNING 1
), autoresponse AS (
    -- The form's autoresponse (an accepted submission within the quota, a valid address):
    -- pending within both bounds, else `skipped` with its reason; at most one per submission
    -- (deliveries_one_autoresponse_idx).
    INSERT INTO deliveries (id, organization_id, kind, submission_id, channel, status, reason,
                            last_detail, max_attempts, next_attempt_at, target, template)
    SELECT a.id, %(organization_id)s, 'autoresponse', s.id, t.name,
           CASE WHEN v.reason IS NULL THEN 'pending' ELSE 'skipped' END, v.reason, v.reason,
           t.max_attempts, %(now)s, a.target, a.template
      FROM submission s
     CROSS JOIN stored g
     CROSS JOIN (SELECT CASE WHEN x.suppressed THEN 'suppressed'
                             WHEN NOT EXISTS (SELECT 1 FROM autoresponse_installation)
                             THEN 'autoresponse_limited' END AS reason
                   FROM autoresponse_suppressed x) v
     CROSS JOIN jsonb_to_recordset(%(autoresponses)s::jsonb)
           AS a(id text, target jsonb, template jsonb)
      JOIN destination_types t ON t.name = 'email'
     WHERE NOT g.limited AND NOT g.duplicated
    RETURNING id
-- end autoresponse
), event AS (
    INSERT INTO events (organization_id, type, subject_id, data)
    SELECT %(organization_id)s, e.item ->> 'type', s.id, e.item -> 'data'
      FROM submission s
     CROSS JOIN stored g
     CROSS JOIN jsonb_array_elements(CASE WHEN g.limited THEN %(limited_events)s::jsonb
                                          WHEN g.duplicated THEN %(duplicate_events)s::jsonb
                                          ELSE %(events)s::jsonb END)
           WITH ORDINALITY AS e(item, n)
     ORDER BY e.n
-- if drift
), drift AS (
    -- The schema drift the submission showed, counted per form, hour, path and keyword;
    -- a row written now (not counted up) is the first of its hour.
    INSERT INTO schema_drift AS d (organization_id, form_id, hour, path, keyword, count,
                                   first_seen, last_seen)
    SELECT %(organization_id)s, %(form_id)s, date_trunc('hour', %(now)s::timestamptz, 'UTC'),
           x.path, x.keyword, 1, %(now)s, %(now)s
      FROM submission s
     CROSS JOIN stored g
     CROSS JOIN jsonb_to_recordset(%(drift)s::jsonb) AS x(path text, keyword text)
     WHERE NOT g.limited AND NOT g.duplicated
    ON CONFLICT ON CONSTRAINT schema_drift_key
    DO UPDATE SET count = d.count + 1, last_seen = greatest(d.last_seen, excluded.last_seen)
    RETURNING d.path, d.keyword, d.count
), drift_event AS (
    -- One `schema.drift` event per rule and hour, whatever the flood.
    INSERT INTO events (organization_id, type, subject_id, data)
    SELECT %(organization_id)s, 'schema.drift', %(form_id)s,
           jsonb_build_object('form', %(form_id)s::text, 'schema_version', %(schema_version)s,
                              'mode', %(schema_mode)s::text,
                              'first_submission', (SELECT id FROM submission),
                              'errors', jsonb_agg(jsonb_build_object('path', dr.path,
                                                                     'keyword', dr.keyword)
                                                  ORDER BY dr.path, dr.keyword))
      FROM drift dr
     WHERE dr.count = 1
    HAVING count(*) > 0
-- end drift
), usage AS (
    -- One of the month's shards 1-63, at random: concurrent submits rarely wait on each
    -- other (0064). Shard 0 counts bytes, and a statement may upsert a row only once (review_room).
    INSERT INTO usage_counters (organization_id, month, shard, submissions)
    SELECT %(organization_id)s, %(month)s, 1 + floor(random() * 63)::smallint, 1
      FROM submission CROSS JOIN stored g
     WHERE %(counted)s AND NOT g.limited AND NOT g.duplicated
    ON CONFLICT (organization_id, month, shard)
    DO UPDATE SET submissions = usage_counters.submissions + 1
)
SELECT s.id, true AS created, s.status, s.reason, NULL::bytea AS payload_hash,
       (SELECT count(*) FROM delivery)
-- if acknowledgement
       + (SELECT count(*) FROM acknowledgement)
-- end acknowledgement
-- if autoresponse
       + (SELECT count(*) FROM autoresponse)
-- end autoresponse
       AS deliveries,
       NULL::timestamptz AS retry_at
  FROM submission s
UNION ALL
SELECT e.id, false, NULL, NULL, e.payload_hash, 0, NULL FROM existing e
 WHERE (SELECT current FROM fresh)
UNION ALL
SELECT NULL, false, 'stale', NULL, NULL, 0, NULL WHERE NOT (SELECT current FROM fresh)
UNION ALL
-- Refused, nothing stored: a flood (the caller asks when to retry: `flood_retry_at`), or
-- the month's review bytes full (retry next month).
SELECT NULL, false, 'flooded', NULL, NULL, 0, NULL
  FROM gate g
 WHERE g.flooded AND NOT EXISTS (SELECT 1 FROM existing)
UNION ALL
SELECT NULL, false, 'review_full', NULL, NULL, 0, %(next_month)s::timestamptz
  FROM judged a
 WHERE a.for_review AND NOT EXISTS (SELECT 1 FROM review_room)

-- name: flood_retry_at
-- When a flooding client may post again: once the oldest of its counted submissions (the
-- newest `flood_max` in the window) leaves the window. Asked only after a refused flood, so
-- the submit statement plans no read of every week of submissions for it; like the gate
-- (0069), it reads only the weeks of ids made since eight days before the window.
SELECT (SELECT min(c.received_at) FROM (
            SELECT c.received_at FROM submissions c
             WHERE c.form_id = %(form_id)s AND c.client_hash = %(client_hash)s
               AND c.received_at > %(now)s - make_interval(secs => %(rate_limit_seconds)s::int)
               AND c.id >= submission_id_bound(%(now)s - make_interval(
                       secs => %(rate_limit_seconds)s::int) - interval '8 days')
             ORDER BY c.received_at DESC LIMIT %(flood_max)s) c)
       + make_interval(secs => %(rate_limit_seconds)s::int) AS retry_at

-- name: insert_stored_objects
-- Record storage keys before their bytes are written, so an orphan can always be found.
INSERT INTO stored_objects (storage_key, organization_id, submission_id, created_at)
SELECT key, %(organization_id)s, %(submission_id)s, %(now)s
  FROM unnest(%(storage_keys)s::text[]) AS key
