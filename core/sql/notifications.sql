-- name: get_notify
-- The organization's notification addresses and notice destination.
SELECT notify, notify_destination_id AS notify_destination
  FROM organizations WHERE id = %(organization_id)s

-- name: set_notify
-- Replace the organization's notification addresses, its notice destination, or both.
UPDATE organizations
   SET notify = CASE WHEN %(set_notify)s THEN %(notify)s::text[] ELSE notify END,
       notify_destination_id = CASE WHEN %(set_destination)s THEN %(destination)s::text
                                    ELSE notify_destination_id END
 WHERE id = %(organization_id)s
RETURNING notify, notify_destination_id AS notify_destination

-- name: notice_destination_type
-- The type of a live destination of the organization (one chosen for notices).
SELECT type FROM destinations
 WHERE id = %(id)s AND organization_id = %(organization_id)s AND deleted_at IS NULL

-- name: insert_notice_delivery
-- The notices' delivery to the organization's notice destination, due now: only while it
-- is live, on, not failing, of a chat or webhook type (%(types)s) and not what a notice is
-- about (%(about)s); else nothing. Its target and secret are the destination's.
INSERT INTO deliveries (id, organization_id, kind, destination_id, channel, max_attempts,
                        next_attempt_at, payload, target, secret_version, created_at,
                        updated_at)
SELECT %(id)s, d.organization_id, 'notification', d.id, d.type, t.max_attempts, %(now)s,
       %(payload)s, d.config,
       (SELECT max(v.version) FROM destination_secrets v WHERE v.destination_id = d.id),
       %(now)s, %(now)s
  FROM destinations d
  JOIN destination_types t ON t.name = d.type
 WHERE d.id = %(destination_id)s AND d.organization_id = %(organization_id)s
   AND d.deleted_at IS NULL AND d.enabled AND d.health <> 'failing'
   AND d.type = ANY (%(types)s::text[]) AND d.id <> ALL (%(about)s::text[])
RETURNING id

-- name: recent_notices
-- The organization's latest notices, newest first, with the email that carried each (its
-- addresses and state) and the notice destination's delivery (its name and state).
SELECT n.id, n.kind, n.subject_id, n.data, n.created_at, n.handled_at,
       e.target -> 'to' AS emailed_to, e.status AS email_status,
       dst.name AS destination_name, dd.status AS destination_status
  FROM notifications n
  LEFT JOIN deliveries e ON e.id = n.delivery_id
  LEFT JOIN deliveries dd ON dd.id = n.destination_delivery_id
  LEFT JOIN destinations dst ON dst.id = dd.destination_id
 WHERE n.organization_id = %(organization_id)s
 ORDER BY n.id DESC
 LIMIT %(limit)s

-- name: notice_quota_reached
-- A notice for each organization whose counted submissions this month reached its plan's
-- monthly limit (%(limits)s: plan name to limit, null for none), once per month.
INSERT INTO notifications (organization_id, kind, subject_id, data, created_at)
SELECT u.organization_id, 'quota.reached', to_char(u.month, 'YYYY-MM'),
       jsonb_build_object('month', to_char(u.month, 'YYYY-MM'),
                          'submissions', sum(u.submissions),
                          'limit', (%(limits)s::jsonb ->> o.plan)::integer),
       %(now)s
  FROM usage_counters u
  JOIN organizations o ON o.id = u.organization_id
 WHERE u.month = %(month)s AND (%(limits)s::jsonb ->> o.plan) IS NOT NULL
   AND NOT EXISTS (SELECT FROM notifications n
                    WHERE n.organization_id = u.organization_id AND n.kind = 'quota.reached'
                      AND n.subject_id = to_char(u.month, 'YYYY-MM'))
 GROUP BY u.organization_id, u.month, o.plan
HAVING sum(u.submissions) >= (%(limits)s::jsonb ->> o.plan)::integer
ON CONFLICT (organization_id, kind, subject_id) WHERE kind <> 'destination.paused' DO NOTHING

-- name: notice_dead_alerts
-- A notice for each `delivery.dead` alert opened in the last day about a destination or a
-- form: its first dead delivery since the last one was resolved or acknowledged (the
-- first of a storm; the alert counts the rest). Once per alert. Names only: the alert's
-- detail (a receiver's error text may echo a value) stays in the alert, which erasure cleans.
INSERT INTO notifications (organization_id, kind, subject_id, data, created_at)
SELECT a.organization_id, 'delivery.dead', a.id,
       jsonb_build_object('subject', a.subject_id, 'name', coalesce(d.name, f.name),
                          'subject_type', CASE WHEN d.id IS NOT NULL THEN 'destination'
                                               ELSE 'form' END,
                          'first_at', a.first_at),
       %(now)s
  FROM alerts a
  LEFT JOIN destinations d ON d.id = a.subject_id AND d.organization_id = a.organization_id
  LEFT JOIN forms f ON f.id = a.subject_id AND f.organization_id = a.organization_id
 WHERE a.kind = 'delivery.dead' AND a.status = 'open'
   AND a.first_at > %(now)s - interval '1 day'
   AND (d.id IS NOT NULL OR f.id IS NOT NULL)
   AND NOT EXISTS (SELECT FROM notifications n
                    WHERE n.organization_id = a.organization_id AND n.kind = 'delivery.dead'
                      AND n.subject_id = a.id)
ON CONFLICT (organization_id, kind, subject_id) WHERE kind <> 'destination.paused' DO NOTHING

-- name: notices_due
-- The (organization, kind) pairs with notices not yet handled whose last email (or notice
-- destination's delivery) of that kind went out an hour ago or more (or never), at most
-- %(limit)s.
SELECT p.organization_id, p.kind
  FROM (SELECT DISTINCT organization_id, kind FROM notifications
         WHERE handled_at IS NULL) p
 WHERE NOT EXISTS (SELECT FROM notifications m
                    WHERE m.organization_id = p.organization_id AND m.kind = p.kind
                      AND (m.delivery_id IS NOT NULL OR m.destination_delivery_id IS NOT NULL)
                      AND m.handled_at > %(now)s - interval '1 hour')
 ORDER BY p.organization_id, p.kind
 LIMIT %(limit)s

-- name: lock_notifying_organization
-- Lock the organization's row for the transaction: one worker at a time folds its notices
-- (the next statement, a new snapshot, sees what the one before it committed). Returns
-- its addresses and notice destination.
SELECT notify, notify_destination_id FROM organizations
 WHERE id = %(organization_id)s FOR NO KEY UPDATE

-- name: notices_to_fold
-- The organization's unhandled notices of a kind, oldest first, unless one of that kind
-- went out within the hour (another worker was first).
SELECT n.id, n.subject_id, n.data, n.created_at
  FROM notifications n
 WHERE n.organization_id = %(organization_id)s AND n.kind = %(kind)s AND n.handled_at IS NULL
   AND NOT EXISTS (SELECT FROM notifications m
                    WHERE m.organization_id = n.organization_id AND m.kind = n.kind
                      AND (m.delivery_id IS NOT NULL OR m.destination_delivery_id IS NOT NULL)
                      AND m.handled_at > %(now)s - interval '1 hour')
 ORDER BY n.id

-- name: insert_notice_email
-- The email that carries notices: a delivery of kind `notification` through the email
-- adapter, due now.
INSERT INTO deliveries (id, organization_id, kind, channel, max_attempts, next_attempt_at,
                        payload, target, created_at, updated_at)
SELECT %(id)s, %(organization_id)s, 'notification', t.name, t.max_attempts, %(now)s,
       %(payload)s, %(target)s, %(now)s, %(now)s
  FROM destination_types t WHERE t.name = 'email'

-- name: handle_notices
-- Mark notices handled: folded into the email `delivery_id` and the notice destination's
-- delivery, or dropped (no address, no destination).
UPDATE notifications
   SET handled_at = %(now)s, delivery_id = %(delivery_id)s,
       destination_delivery_id = %(destination_delivery_id)s
 WHERE id = ANY (%(ids)s::bigint[])
