-- name: insert_dashboard_session
-- Open a dashboard session for an organization's live API key.
INSERT INTO dashboard_sessions (id_hash, organization_id, api_key_id, csrf_token, created_at,
                                last_seen_at)
VALUES (%(id_hash)s, %(organization_id)s, %(api_key_id)s, %(csrf_token)s, %(now)s, %(now)s)

-- name: touch_dashboard_session
-- The live session with this id (key not revoked, not idle too long), marked seen now.
UPDATE dashboard_sessions s
   SET last_seen_at = %(now)s
  FROM api_keys k, organizations o
 WHERE s.id_hash = %(id_hash)s
   AND s.last_seen_at > %(now)s - make_interval(secs => %(idle_seconds)s)
   AND k.id = s.api_key_id AND k.revoked_at IS NULL
   AND o.id = s.organization_id
RETURNING s.organization_id, s.csrf_token, o.name AS organization_name,
          k.id AS api_key_id, k.name AS api_key_name, k.role AS api_key_role

-- name: delete_dashboard_session
-- Sign out: forget the session.
DELETE FROM dashboard_sessions WHERE id_hash = %(id_hash)s

-- name: delete_idle_dashboard_sessions
-- Forget sessions idle for longer than the limit.
DELETE FROM dashboard_sessions
 WHERE last_seen_at <= %(now)s - make_interval(secs => %(idle_seconds)s)

-- name: delivery_counts_for_submissions
-- For the inbox's one-line summary: how many of each submission's deliveries are in each state.
SELECT submission_id, status, count(*)::int AS n
  FROM deliveries
 WHERE organization_id = %(organization_id)s AND submission_id = ANY(%(ids)s::text[])
 GROUP BY submission_id, status

-- name: destination_success_rates
-- Share of each destination's finished deliveries of the last 7 days that were sent.
SELECT destination_id,
       count(*) FILTER (WHERE status = 'sent')::int AS sent,
       count(*) FILTER (WHERE status IN ('sent', 'dead', 'failed'))::int AS finished
  FROM deliveries
 WHERE organization_id = %(organization_id)s AND destination_id IS NOT NULL
   AND created_at > %(now)s - interval '7 days'
 GROUP BY destination_id

-- name: recent_events
-- The organization's newest events, newest first.
SELECT id, type, subject_id, data, created_at
  FROM events
 WHERE organization_id = %(organization_id)s
 ORDER BY id DESC
 LIMIT %(limit)s
