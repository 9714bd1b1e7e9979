-- name: lock_submission_for_review
-- A submission to release or mark as spam, locked against a concurrent review, erase or
-- retention pass, with what its delivery snapshot needs: its form's labels, name, consent
-- and acknowledgement fields, and its attachments.
SELECT s.id, s.form_id, s.status, s.reason, s.flags, s."values", s.field_order, s.meta,
       s.received_at, s.erase_at, s.erased_at, s.released_at,
       f.name AS form_name, f.labels, f.consent_field, f.ack_email,
       f.retention_days AS form_retention_days,
       (SELECT o.plan FROM organizations o WHERE o.id = s.organization_id) AS plan,
       coalesce((SELECT jsonb_agg(jsonb_build_object(
                            'id', a.id, 'field', a.field, 'name', a.name,
                            'content_type', a.content_type, 'size', a.size) ORDER BY a.id)
                   FROM attachments a WHERE a.submission_id = s.id), '[]'::jsonb) AS attachments
  FROM submissions s
  JOIN forms f ON f.id = s.form_id AND f.organization_id = s.organization_id
 WHERE s.id = %(id)s AND s.organization_id = %(organization_id)s
   FOR UPDATE OF s

-- name: release_routes
-- The form's live immediate routes that take accepted submissions, with their templates.
SELECT r.id AS route_id, r.template
  FROM routes r
  JOIN destinations d ON d.id = r.destination_id AND d.organization_id = r.organization_id
 WHERE r.form_id = %(form_id)s AND r.organization_id = %(organization_id)s
   AND r.enabled AND r.deleted_at IS NULL AND r.mode = 'immediate'
   AND 'accepted' = ANY (r.include_statuses) AND d.deleted_at IS NULL
 ORDER BY r.id

-- name: release_submission
-- Release a locked submission: one delivery per planned route (a route that already has a
-- delivery of this submission keeps it: the (submission, route) key), its deliveries that
-- an earlier spam mark skipped queued again, the status `accepted` with `released_at`, and
-- a `submission.released` event naming the status and reason it had, and the retention of
-- an accepted submission (`erase_at`) in place of the spam retention. Returns how many
-- deliveries it planned or queued again.
WITH requeued AS (
    UPDATE deliveries
       SET status = 'pending', reason = NULL, next_attempt_at = %(now)s, updated_at = %(now)s
     WHERE submission_id = %(id)s AND organization_id = %(organization_id)s
       AND status = 'skipped' AND reason = 'submission_spam'
    RETURNING id
), planned AS (
    INSERT INTO deliveries (id, organization_id, kind, submission_id, route_id, destination_id,
                            channel, max_attempts, next_attempt_at, target, template,
                            secret_version)
    SELECT p.id, %(organization_id)s, 'submission', %(id)s, r.id, d.id, d.type,
           t.max_attempts, %(now)s, d.config, p.template,
           (SELECT max(v.version) FROM destination_secrets v WHERE v.destination_id = d.id)
      FROM jsonb_to_recordset(%(deliveries)s::jsonb) AS p(id text, route_id text, template jsonb)
      JOIN routes r ON r.id = p.route_id AND r.enabled AND r.deleted_at IS NULL
      JOIN destinations d
        ON d.id = r.destination_id AND d.organization_id = r.organization_id
       AND d.deleted_at IS NULL
      JOIN destination_types t ON t.name = d.type
    ON CONFLICT ON CONSTRAINT deliveries_submission_route_key DO NOTHING
    RETURNING id
), delivery AS (
    SELECT id FROM requeued UNION ALL SELECT id FROM planned
), released AS (
    UPDATE submissions
       SET status = 'accepted', reason = NULL, released_at = %(now)s, erase_at = %(erase_at)s,
           form_snapshot = coalesce(form_snapshot, %(form_snapshot)s)
     WHERE id = %(id)s AND organization_id = %(organization_id)s
), event AS (
    INSERT INTO events (organization_id, type, subject_id, data, created_at)
    SELECT %(organization_id)s, 'submission.released', %(id)s,
           jsonb_build_object('form', %(form_id)s::text, 'from_status', %(from_status)s::text,
                              'from_reason', %(from_reason)s::text,
                              'deliveries', count(*)),
           %(now)s
      FROM delivery
)
SELECT count(*) AS deliveries FROM delivery

-- name: mark_submission_spam
-- Mark a locked submission as spam (reason `marked_spam`, the spam retention's `erase_at`):
-- its unsent deliveries end
-- `skipped` (`submission_spam`), and a `submission.marked_spam` event names the status and
-- reason it had. Returns how many deliveries it skipped.
WITH skipped AS (
    UPDATE deliveries
       SET status = 'skipped', reason = 'submission_spam', held = false, updated_at = %(now)s
     WHERE submission_id = %(id)s AND organization_id = %(organization_id)s
       AND status IN ('pending', 'failed')
    RETURNING id
), marked AS (
    UPDATE submissions SET status = 'spam', reason = 'marked_spam', erase_at = %(erase_at)s
     WHERE id = %(id)s AND organization_id = %(organization_id)s
), event AS (
    INSERT INTO events (organization_id, type, subject_id, data, created_at)
    SELECT %(organization_id)s, 'submission.marked_spam', %(id)s,
           jsonb_build_object('form', %(form_id)s::text, 'from_status', %(from_status)s::text,
                              'from_reason', %(from_reason)s::text, 'skipped', count(*)),
           %(now)s
      FROM skipped
)
SELECT count(*) AS skipped FROM skipped
