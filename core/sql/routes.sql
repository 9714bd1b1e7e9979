-- name: insert_route
-- Create a route from a live form to a live destination.
INSERT INTO routes (id, organization_id, form_id, destination_id, enabled, include_statuses,
                    mode, period, template)
VALUES (%(id)s, %(organization_id)s, %(form_id)s, %(destination_id)s, %(enabled)s,
        %(include_statuses)s, %(mode)s, %(period)s, %(template)s)
RETURNING id, form_id, destination_id, enabled, include_statuses, mode, period, template,
          created_at, updated_at

-- name: live_destination_type
-- The type of a live destination, locked against deletion while a route is made to it.
SELECT type FROM destinations
 WHERE id = %(id)s AND organization_id = %(organization_id)s AND deleted_at IS NULL
   FOR SHARE

-- name: live_form_exists
-- Whether a form is live, locked against deletion while a route is made from it. Locked
-- for an update, since the route's insert moves the form's revision (0018): two routes
-- made at once from one form queue here rather than each wait for the other's share.
SELECT id FROM forms
 WHERE id = %(id)s AND organization_id = %(organization_id)s AND deleted_at IS NULL
   FOR NO KEY UPDATE

-- name: lock_route_form
-- Lock the form of a route before the route: a route's change moves its form's revision
-- (0018), and a form's deletion locks the form before its routes, so every writer takes
-- the form first and none waits on another in a cycle.
SELECT f.id
  FROM forms f
  JOIN routes r ON r.form_id = f.id AND r.organization_id = f.organization_id
 WHERE r.id = %(id)s AND r.organization_id = %(organization_id)s
   FOR NO KEY UPDATE OF f

-- name: list_form_routes
-- One page of a live form's live routes, by id, after a cursor.
SELECT id, form_id, destination_id, enabled, include_statuses, mode, period, template,
       created_at, updated_at
  FROM routes
 WHERE form_id = %(form_id)s
   AND organization_id = %(organization_id)s
   AND deleted_at IS NULL
   AND (%(after)s::text IS NULL OR id > %(after)s)
 ORDER BY id
 LIMIT %(limit)s

-- name: lock_route
-- Lock one live route for an update, with its destination's type.
SELECT r.id, r.form_id, r.destination_id, r.enabled, r.include_statuses, r.mode, r.period,
       r.template, r.created_at, r.updated_at, d.type AS destination_type
  FROM routes r
  JOIN destinations d ON d.id = r.destination_id AND d.organization_id = r.organization_id
 WHERE r.id = %(id)s AND r.organization_id = %(organization_id)s AND r.deleted_at IS NULL
   FOR UPDATE OF r

-- name: update_route
-- Write a live route's settings.
UPDATE routes
   SET enabled = %(enabled)s, include_statuses = %(include_statuses)s, mode = %(mode)s,
       period = %(period)s, template = %(template)s, updated_at = now()
 WHERE id = %(id)s AND organization_id = %(organization_id)s AND deleted_at IS NULL
RETURNING id, form_id, destination_id, enabled, include_statuses, mode, period, template,
          created_at, updated_at

-- name: delete_route
-- Remove a live route softly; returns nothing when there is no such live route.
UPDATE routes SET deleted_at = now(), updated_at = now()
 WHERE id = %(id)s AND organization_id = %(organization_id)s AND deleted_at IS NULL
RETURNING id
