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
-- One page of the organization's alerts, newest first (keyset on id), with the name of
-- its subject (a destination or a form) and the submission of its last delivery.
SELECT a.id, a.kind, a.subject_id, a.status, a.occurrences, a.detail, a.last_delivery_id,
       a.first_at, a.last_at, a.acknowledged_at, a.resolved_at, a.resolved_by_delivery_id,
       coalesce(d.name, f.name) AS subject_name,
       CASE WHEN d.id IS NOT NULL THEN 'destination'
            WHEN f.id IS NOT NULL THEN 'form' END AS subject_type,
       l.submission_id AS last_delivery_submission
  FROM alerts a
  LEFT JOIN destinations d ON d.id = a.subject_id AND d.organization_id = a.organization_id
  LEFT JOIN forms f ON f.id = a.subject_id AND f.organization_id = a.organization_id
  LEFT JOIN deliveries l
    ON l.id = a.last_delivery_id AND l.organization_id = a.organization_id
 WHERE a.organization_id = %(organization_id)s
   AND (%(status)s::text IS NULL OR a.status = %(status)s)
   AND (%(before)s::text IS NULL OR a.id < %(before)s)
 ORDER BY a.id DESC
 LIMIT %(limit)s

-- name: ack_alert
-- Acknowledge an open alert (acknowledging twice keeps the first time; a resolved alert
-- stays resolved).
UPDATE alerts
   SET status = CASE WHEN status = 'resolved' THEN status ELSE 'acknowledged' END,
       acknowledged_at = CASE WHEN status = 'resolved' THEN acknowledged_at
                              ELSE coalesce(acknowledged_at, %(now)s) END
 WHERE id = %(id)s AND organization_id = %(organization_id)s
RETURNING id, kind, subject_id, status, occurrences, detail, last_delivery_id, first_at,
          last_at, acknowledged_at, resolved_at, resolved_by_delivery_id
