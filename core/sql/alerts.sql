-- name: raise_alert
-- Open an alert, or count one more occurrence on the open alert of the same subject.
INSERT INTO alerts (id, organization_id, kind, subject_id, detail, last_delivery_id,
                    first_at, last_at)
VALUES (%(id)s, %(organization_id)s, %(kind)s, %(subject_id)s, %(detail)s,
        %(last_delivery_id)s, %(now)s, %(now)s)
ON CONFLICT (organization_id, kind, subject_id) WHERE status = 'open'
DO UPDATE SET occurrences = alerts.occurrences + 1, detail = EXCLUDED.detail,
              last_delivery_id = EXCLUDED.last_delivery_id, last_at = EXCLUDED.last_at
RETURNING id, occurrences

-- name: list_alerts
-- One page of the organization's alerts, newest first (keyset on id).
SELECT id, kind, subject_id, status, occurrences, detail, last_delivery_id, first_at, last_at,
       acknowledged_at
  FROM alerts
 WHERE organization_id = %(organization_id)s
   AND (%(status)s::text IS NULL OR status = %(status)s)
   AND (%(before)s::text IS NULL OR id < %(before)s)
 ORDER BY id DESC
 LIMIT %(limit)s

-- name: ack_alert
-- Acknowledge an open alert (acknowledging twice keeps the first time).
UPDATE alerts
   SET status = 'acknowledged', acknowledged_at = coalesce(acknowledged_at, %(now)s)
 WHERE id = %(id)s AND organization_id = %(organization_id)s
RETURNING id, kind, subject_id, status, occurrences, detail, last_delivery_id, first_at,
          last_at, acknowledged_at
