-- name: list_deliveries
-- One page of the organization's deliveries, newest first, filtered (keyset on id).
SELECT id, submission_id, destination_id, kind, channel, status, reason, attempts,
       next_attempt_at, last_detail, created_at, sent_at
  FROM deliveries
 WHERE organization_id = %(organization_id)s
   AND (%(status)s::text IS NULL OR status = %(status)s)
   AND (%(destination)s::text IS NULL OR destination_id = %(destination)s)
   AND (%(submission)s::text IS NULL OR submission_id = %(submission)s)
   AND (%(before)s::text IS NULL OR id < %(before)s)
 ORDER BY id DESC
 LIMIT %(limit)s

-- name: get_delivery
-- One delivery of the organization.
SELECT id, submission_id, destination_id, kind, channel, status, reason, attempts,
       max_attempts, next_attempt_at, last_detail, created_at, sent_at
  FROM deliveries
 WHERE id = %(id)s AND organization_id = %(organization_id)s

-- name: list_attempts
-- Every attempt of one delivery, oldest first.
SELECT attempt, started_at, duration_ms, outcome, http_status, error_class, response_excerpt
  FROM delivery_attempts
 WHERE delivery_id = %(id)s AND organization_id = %(organization_id)s
 ORDER BY id

-- name: lock_delivery_for_retry
-- A delivery with what retry-by-hand checks, locked until the transaction ends (a stream
-- event's erase counts as its submission's would).
SELECT d.id, d.status, d.claimed_until, d.submission_id, d.event_id, d.destination_id,
       coalesce(s.erased_at, ev.erased_at) AS erased_at,
       coalesce(s.erase_at, ev.erase_at) AS erase_at,
       dst.deleted_at AS destination_deleted_at, dst.enabled AS destination_enabled
  FROM deliveries d
  LEFT JOIN submissions s ON s.id = d.submission_id
  LEFT JOIN stream_events ev ON ev.id = d.event_id
  LEFT JOIN destinations dst ON dst.id = d.destination_id
 WHERE d.id = %(id)s AND d.organization_id = %(organization_id)s
   FOR UPDATE OF d

-- name: requeue_delivery
-- Retry by hand: the same delivery and snapshot, attempts reset, due now.
UPDATE deliveries
   SET status = 'pending', attempts = 0, next_attempt_at = %(now)s, reason = NULL,
       held = false, throttled = false, claim_token = NULL, claimed_until = NULL,
       last_detail = 'queued by hand', updated_at = %(now)s
 WHERE id = %(id)s AND organization_id = %(organization_id)s

-- name: notify_deliveries
-- Wake listening workers on the channel core/outbox/wakeup.py names (an accelerator only:
-- the tick drains the outbox regardless).
SELECT pg_notify(%(channel)s, '')

-- name: destination_for_test
-- A live destination of the organization and its current secret.
SELECT d.id, d.type, d.config,
       (SELECT s.secret FROM destination_secrets s
         WHERE s.destination_id = d.id ORDER BY s.version DESC LIMIT 1) AS secret
  FROM destinations d
 WHERE d.id = %(id)s AND d.organization_id = %(organization_id)s AND d.deleted_at IS NULL
