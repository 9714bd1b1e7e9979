-- name: list_events
-- The organization's events after an id, ascending.
SELECT id, type, subject_id, data, created_at
  FROM events
 WHERE organization_id = %(organization_id)s AND id > %(after)s
 ORDER BY id
 LIMIT %(limit)s

-- name: insert_event
-- Append one event to the organization's stream.
INSERT INTO events (organization_id, type, subject_id, data, created_at)
VALUES (%(organization_id)s, %(type)s, %(subject_id)s, %(data)s,
        coalesce(%(now)s::timestamptz, now()))
RETURNING id
