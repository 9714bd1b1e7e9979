-- name: lock_stream_event_for_release
-- A stream's event to release, locked against a concurrent release, erase or retention pass,
-- with what its retention as an accepted event needs (the plan, the stream's own days).
SELECT e.id, e.type, e.status, e.reason, e.received_at, e.erase_at, e.erased_at,
       e.released_at, s.retention_days,
       (SELECT o.plan FROM organizations o WHERE o.id = e.organization_id) AS plan
  FROM stream_events e
  JOIN streams s ON s.id = e.stream_id AND s.organization_id = e.organization_id
 WHERE e.id = %(id)s AND e.stream_id = %(stream_id)s
   AND e.organization_id = %(organization_id)s AND s.deleted_at IS NULL
   FOR UPDATE OF e

-- name: stream_release_routes
-- The stream's live routes that take accepted events of this type.
SELECT r.id AS route_id
  FROM stream_routes r
  JOIN destinations d ON d.id = r.destination_id AND d.organization_id = r.organization_id
 WHERE r.stream_id = %(stream_id)s AND r.organization_id = %(organization_id)s
   AND r.enabled AND r.deleted_at IS NULL AND d.deleted_at IS NULL
   AND 'accepted' = ANY (r.include_statuses)
   AND (r.event_types IS NULL OR %(type)s = ANY (r.event_types))
 ORDER BY r.id

-- name: release_stream_event
-- Release a locked event: one delivery per planned route (a route that already has a
-- delivery of it, one that took quarantined events, keeps it: the (event, route) key), the
-- status `accepted` with `released_at` and an accepted event's retention, and a
-- `stream_event.released` event naming the stream and the status and reason it had.
-- Returns how many deliveries it planned.
WITH planned AS (
    INSERT INTO deliveries (id, organization_id, kind, event_id, stream_route_id,
                            destination_id, channel, max_attempts, next_attempt_at, target,
                            secret_version)
    SELECT p.id, %(organization_id)s, 'event', %(id)s, r.id, d.id, d.type, t.max_attempts,
           %(now)s, d.config,
           (SELECT max(v.version) FROM destination_secrets v WHERE v.destination_id = d.id)
      FROM jsonb_to_recordset(%(deliveries)s::jsonb) AS p(id text, route_id text)
      JOIN stream_routes r ON r.id = p.route_id AND r.enabled AND r.deleted_at IS NULL
      JOIN destinations d
        ON d.id = r.destination_id AND d.organization_id = r.organization_id
       AND d.deleted_at IS NULL
      JOIN destination_types t ON t.name = d.type
    ON CONFLICT (event_id, stream_route_id, organization_id) WHERE event_id IS NOT NULL
    DO NOTHING
    RETURNING id
), released AS (
    UPDATE stream_events
       SET status = 'accepted', reason = NULL, released_at = %(now)s, erase_at = %(erase_at)s
     WHERE id = %(id)s AND organization_id = %(organization_id)s
), event AS (
    INSERT INTO events (organization_id, type, subject_id, data, created_at)
    SELECT %(organization_id)s, 'stream_event.released', %(id)s,
           jsonb_build_object('stream', %(stream_id)s::text,
                              'from_status', %(from_status)s::text,
                              'from_reason', %(from_reason)s::text,
                              'deliveries', count(*)),
           %(now)s
      FROM planned
)
SELECT count(*) AS deliveries FROM planned
