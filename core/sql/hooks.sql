-- name: insert_hook
-- A hook over its new webhook destination (and the route that feeds it, if any).
INSERT INTO hooks (id, organization_id, event, destination_id, form_id, route_id, stream_id,
                   stream_route_id, created_at)
VALUES (%(id)s, %(organization_id)s, %(event)s, %(destination_id)s, %(form_id)s,
        %(route_id)s, %(stream_id)s, %(stream_route_id)s, %(now)s)

-- name: get_hook
-- One live hook (its destination live too) with its target URL.
SELECT h.id, h.event, h.form_id, h.stream_id, h.destination_id, h.created_at,
       d.config ->> 'url' AS target_url
  FROM hooks h
  JOIN destinations d ON d.id = h.destination_id AND d.organization_id = h.organization_id
 WHERE h.id = %(id)s AND h.organization_id = %(organization_id)s
   AND h.deleted_at IS NULL AND d.deleted_at IS NULL

-- name: list_hooks
-- One page of the organization's live hooks (their destinations live too), by id, after a
-- cursor; of one event, form or stream when given.
SELECT h.id, h.event, h.form_id, h.stream_id, h.destination_id, h.created_at,
       d.config ->> 'url' AS target_url
  FROM hooks h
  JOIN destinations d ON d.id = h.destination_id AND d.organization_id = h.organization_id
 WHERE h.organization_id = %(organization_id)s
   AND h.deleted_at IS NULL AND d.deleted_at IS NULL
   AND (%(after)s::text IS NULL OR h.id > %(after)s)
   AND (%(event)s::text IS NULL OR h.event = %(event)s)
   AND (%(form_id)s::text IS NULL OR h.form_id = %(form_id)s)
   AND (%(stream_id)s::text IS NULL OR h.stream_id = %(stream_id)s)
 ORDER BY h.id
 LIMIT %(limit)s

-- name: end_hook
-- End a live hook (by its id, or by its destination's), with why; returns what it was fed
-- by, to remove with it.
UPDATE hooks
   SET deleted_at = %(now)s, deleted_reason = %(reason)s
 WHERE organization_id = %(organization_id)s AND deleted_at IS NULL
   AND (id = %(id)s OR destination_id = %(destination_id)s)
RETURNING id, event, destination_id, form_id, stream_id, stream_route_id

-- name: delete_hook_stream_route
-- Remove the stream route of a hook being ended (its destination goes with it).
UPDATE stream_routes SET deleted_at = %(now)s
 WHERE id = %(id)s AND organization_id = %(organization_id)s AND deleted_at IS NULL

-- name: lifecycle_hooks
-- The live hooks of an organization that subscribe to a lifecycle event, with the
-- destination a delivery to each goes to.
SELECT h.id, d.id AS destination_id, d.type AS channel, d.config AS target,
       (SELECT t.max_attempts FROM destination_types t WHERE t.name = d.type) AS max_attempts
  FROM hooks h
  JOIN destinations d ON d.id = h.destination_id AND d.organization_id = h.organization_id
 WHERE h.organization_id = %(organization_id)s AND h.event = %(event)s
   AND h.deleted_at IS NULL AND d.deleted_at IS NULL
 ORDER BY h.id

-- name: insert_lifecycle_delivery
-- A lifecycle event's delivery to one hook, due now; its body in the payload.
INSERT INTO deliveries (id, organization_id, kind, destination_id, channel, max_attempts,
                        next_attempt_at, payload, target, created_at, updated_at)
VALUES (%(id)s, %(organization_id)s, 'lifecycle', %(destination_id)s, %(channel)s,
        %(max_attempts)s, %(now)s, %(payload)s, %(target)s, %(now)s, %(now)s)

-- name: latest_form_submissions
-- A live form's newest accepted submissions that still hold their values, with what their
-- `form.submitted` body is built from (as the outbox's claim reads it).
SELECT s.id AS submission_id, s.form_id, s."values", s.field_order, s.meta, s.form_snapshot,
       s.received_at, 'test' = ANY (s.flags) AS test,
       coalesce((SELECT jsonb_agg(jsonb_build_object(
                            'id', a.id, 'field', a.field, 'name', a.name,
                            'content_type', a.content_type, 'size', a.size) ORDER BY a.id)
                   FROM attachments a WHERE a.submission_id = s.id), '[]'::jsonb) AS attachments
  FROM submissions s
 WHERE s.form_id = %(form_id)s AND s.organization_id = %(organization_id)s
   AND s.status = 'accepted' AND s.erased_at IS NULL
   AND (s.erase_at IS NULL OR s.erase_at > %(now)s)
 ORDER BY s.id DESC
 LIMIT %(limit)s

-- name: form_for_sample
-- A live form's labels, consent field and current schema (its newest manual version), for
-- a placeholder sample.
SELECT f.id, f.labels, f.consent_field,
       (SELECT fs.schema FROM form_schemas fs
         WHERE fs.form_id = f.id AND fs.organization_id = f.organization_id
           AND fs.source = 'manual'
         ORDER BY fs.version DESC LIMIT 1) AS schema
  FROM forms f
 WHERE f.id = %(id)s AND f.organization_id = %(organization_id)s AND f.deleted_at IS NULL

-- name: latest_stream_events
-- A live stream's newest accepted events that still hold their data, with the columns
-- their `stream.event` body is built from (as the outbox's claim names them).
SELECT e.id AS event_id, e.stream_id AS event_stream_id, e.client_id AS event_client_id,
       e.type AS event_type, e.occurred_at AS event_occurred_at,
       e.received_at AS event_received_at, e.data AS event_data
  FROM stream_events e
 WHERE e.stream_id = %(stream_id)s AND e.organization_id = %(organization_id)s
   AND e.status = 'accepted' AND e.erased_at IS NULL AND e.data IS NOT NULL
   AND (e.erase_at IS NULL OR e.erase_at > %(now)s)
 ORDER BY e.id DESC
 LIMIT %(limit)s

-- name: stream_for_sample
-- A live stream and its newest manual schema version, for a placeholder sample.
SELECT s.id,
       (SELECT ss.schema FROM stream_schemas ss
         WHERE ss.stream_id = s.id AND ss.organization_id = s.organization_id
           AND ss.source = 'manual'
         ORDER BY ss.version DESC LIMIT 1) AS schema,
       (SELECT ss.event_type FROM stream_schemas ss
         WHERE ss.stream_id = s.id AND ss.organization_id = s.organization_id
           AND ss.source = 'manual'
         ORDER BY ss.version DESC LIMIT 1) AS event_type
  FROM streams s
 WHERE s.id = %(id)s AND s.organization_id = %(organization_id)s AND s.deleted_at IS NULL

-- name: insert_hook_event
-- An event about a hook (`hook.unsubscribed`) in its organization's stream.
INSERT INTO events (organization_id, type, subject_id, data, created_at)
VALUES (%(organization_id)s, %(type)s, %(subject_id)s, %(data)s, %(now)s)
