-- name: track_failing_since
-- Note when the storm breaker turned each destination `failing`, and forget it once the
-- breaker restored it (the retention tick, each pass: one write per change).
UPDATE destinations
   SET failing_since = CASE WHEN health = 'failing' THEN %(now)s END
 WHERE deleted_at IS NULL AND (health = 'failing') <> (failing_since IS NOT NULL)

-- name: pause_failing_destinations
-- Pause, with reason `failing`, each live destination that the breaker has held `failing`
-- for its window (`pause_after_hours`) and whose attempts in that window, at least
-- `pause_after_attempts` of them, all failed; in the same statement its
-- `destination.paused` event and the owner's notice. Only the attempts of destinations
-- failing for the whole window are read (none, most passes). The UPDATE re-checks
-- `enabled` and `health` under the row lock: the owner's pause or resume, or a success,
-- meanwhile wins.
WITH candidates AS MATERIALIZED (
    SELECT d.id, d.organization_id, d.pause_after_hours, d.pause_after_attempts
      FROM destinations d
     WHERE d.deleted_at IS NULL AND d.enabled AND d.health = 'failing'
       AND d.failing_since <= %(now)s - make_interval(hours => d.pause_after_hours)
),
judged AS (
    SELECT c.id, count(*) AS attempts
      FROM candidates c
      JOIN deliveries dl ON dl.destination_id = c.id AND dl.organization_id = c.organization_id
      JOIN delivery_attempts a ON a.delivery_id = dl.id
     WHERE a.started_at > %(now)s - make_interval(hours => c.pause_after_hours)
       AND a.started_at <= %(now)s AND a.outcome <> 'fenced'
     GROUP BY c.id, c.pause_after_attempts
    HAVING count(*) >= c.pause_after_attempts
       AND count(*) FILTER (WHERE a.outcome = 'sent') = 0
),
paused AS (
    UPDATE destinations d
       SET enabled = false, paused_reason = 'failing', paused_at = %(now)s,
           updated_at = %(now)s
      FROM judged j
     WHERE d.id = j.id AND d.enabled AND d.deleted_at IS NULL AND d.health = 'failing'
    RETURNING d.id, d.organization_id, d.name, d.type, d.pause_after_hours,
              d.pause_after_attempts, j.attempts
),
event AS (
    INSERT INTO events (organization_id, type, subject_id, data, created_at)
    SELECT organization_id, 'destination.paused', id,
           jsonb_build_object('destination', id, 'reason', 'failing',
                              'hours', pause_after_hours, 'attempts', attempts),
           %(now)s
      FROM paused
),
notice AS (
    INSERT INTO notifications (organization_id, kind, subject_id, data, created_at)
    SELECT organization_id, 'destination.paused', id,
           jsonb_build_object('name', name, 'type', type, 'hours', pause_after_hours,
                              'attempts', attempts, 'threshold', pause_after_attempts),
           %(now)s
      FROM paused
)
SELECT id, organization_id, pause_after_hours, pause_after_attempts, attempts FROM paused

-- name: pause_destination
-- The owner's pause of a live destination that is not paused already (a destination
-- paused for failing keeps that reason); returns a row when it paused it.
UPDATE destinations
   SET enabled = false, paused_reason = 'owner', paused_at = %(now)s, updated_at = %(now)s
 WHERE id = %(id)s AND organization_id = %(organization_id)s AND deleted_at IS NULL
   AND enabled
RETURNING id

-- name: resume_destination
-- Resume a paused live destination, whatever its reason: the breaker starts afresh (the
-- owner says the receiver is back; five failures in a row turn it `failing` again) and so
-- does its window. Returns the reason and time of the pause it ended.
UPDATE destinations d
   SET enabled = true, paused_reason = NULL, paused_at = NULL, failing_since = NULL,
       health = 'healthy', consecutive_failures = 0, probe_after = NULL, updated_at = %(now)s
  FROM destinations old
 WHERE d.id = %(id)s AND d.organization_id = %(organization_id)s AND d.deleted_at IS NULL
   AND NOT d.enabled AND old.id = d.id
RETURNING old.paused_reason, old.paused_at, old.pause_after_hours

-- name: release_waiting
-- Queue now every delivery that waited while a destination was paused: those parked, those
-- parked behind its probe, and the former probe with the backoff its failure gave it (the
-- owner says the receiver is back): they are claimed as any other.
UPDATE deliveries
   SET throttled = false, next_attempt_at = %(now)s, updated_at = %(now)s
 WHERE destination_id = %(id)s AND organization_id = %(organization_id)s
   AND status IN ('pending', 'failed') AND (throttled OR next_attempt_at > %(now)s)

-- name: resolve_pause_alert
-- The owner resumed a destination: the open alert of its pause is resolved (one the owner
-- acknowledged stays acknowledged).
UPDATE alerts
   SET status = 'resolved', resolved_at = %(now)s
 WHERE organization_id = %(organization_id)s AND subject_id = %(id)s
   AND kind = 'destination.paused' AND status = 'open'
