-- name: list_events
-- The organization's events after an id, ascending.
SELECT id, type, subject_id, data, created_at
  FROM events
 WHERE organization_id = %(organization_id)s AND id > %(after)s
 ORDER BY id
 LIMIT %(limit)s

