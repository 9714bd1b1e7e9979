-- name: insert_destination
-- Create a destination with its validated config.
-- Created turned off, it is paused by its owner.
INSERT INTO destinations (id, organization_id, type, name, config, enabled, paused_reason,
                          paused_at, pause_after_hours, pause_after_attempts, rate_per_second)
VALUES (%(id)s, %(organization_id)s, %(type)s, %(name)s, %(config)s, %(enabled)s,
        CASE WHEN NOT %(enabled)s THEN 'owner' END, CASE WHEN NOT %(enabled)s THEN now() END,
        %(pause_after_hours)s, %(pause_after_attempts)s, %(rate_per_second)s)
RETURNING id

-- name: insert_destination_secret
-- Append the next secret version of a destination (the caller holds its row lock).
INSERT INTO destination_secrets (organization_id, destination_id, version, secret)
SELECT %(organization_id)s, %(destination_id)s, coalesce(max(version), 0) + 1, %(secret)s
  FROM destination_secrets
 WHERE destination_id = %(destination_id)s AND organization_id = %(organization_id)s
RETURNING version

-- name: get_destination
-- One live destination as the API shows it: config, and the current secret version only.
SELECT d.id, d.type, d.name, d.config, d.enabled, d.health, d.health_stats, d.created_at,
       d.updated_at, d.paused_reason, d.paused_at, d.pause_after_hours, d.pause_after_attempts,
       (SELECT max(s.version) FROM destination_secrets s
         WHERE s.destination_id = d.id AND s.organization_id = d.organization_id)
           AS secret_version,
       -- The rate: the owner's or the type's, and what a 429 has lowered it to now (0029).
       postbag_rate_of(d.rate_per_second, d.type, %(type_rates)s) AS rate_per_second,
       d.rate_per_second IS NULL AS rate_default,
       postbag_send_rate(postbag_rate_of(d.rate_per_second, d.type, %(type_rates)s),
                         d.rate_lowered, d.rate_lowered_at, now(), %(recover)s) AS rate_now
  FROM destinations d
 WHERE d.id = %(id)s AND d.organization_id = %(organization_id)s AND d.deleted_at IS NULL

-- name: lock_destination
-- Lock one live destination's row for an update; returns its type.
SELECT id, type FROM destinations
 WHERE id = %(id)s AND organization_id = %(organization_id)s AND deleted_at IS NULL
   FOR UPDATE

-- name: list_destinations
-- One page of the organization's live destinations, by id, after a cursor.
SELECT d.id, d.type, d.name, d.config, d.enabled, d.health, d.health_stats, d.created_at,
       d.updated_at, d.paused_reason, d.paused_at, d.pause_after_hours, d.pause_after_attempts,
       (SELECT max(s.version) FROM destination_secrets s
         WHERE s.destination_id = d.id AND s.organization_id = d.organization_id)
           AS secret_version,
       -- The rate: the owner's or the type's, and what a 429 has lowered it to now (0029).
       postbag_rate_of(d.rate_per_second, d.type, %(type_rates)s) AS rate_per_second,
       d.rate_per_second IS NULL AS rate_default,
       postbag_send_rate(postbag_rate_of(d.rate_per_second, d.type, %(type_rates)s),
                         d.rate_lowered, d.rate_lowered_at, now(), %(recover)s) AS rate_now
  FROM destinations d
 WHERE d.organization_id = %(organization_id)s
   AND d.deleted_at IS NULL
   AND (%(after)s::text IS NULL OR d.id > %(after)s)
 ORDER BY d.id
 LIMIT %(limit)s

-- name: update_destination
-- Write a live destination's name, config, window and (with %(set_rate)s) its rate, which
-- starts again unlowered (its pause and resume have their own statements: core/sql/pauses.sql).
UPDATE destinations
   SET name = coalesce(%(name)s, name),
       config = coalesce(%(config)s, config),
       pause_after_hours = coalesce(%(pause_after_hours)s, pause_after_hours),
       pause_after_attempts = coalesce(%(pause_after_attempts)s, pause_after_attempts),
       rate_per_second = CASE WHEN %(set_rate)s THEN %(rate_per_second)s::double precision
                              ELSE rate_per_second END,
       rate_lowered = CASE WHEN %(set_rate)s THEN NULL ELSE rate_lowered END,
       rate_lowered_at = CASE WHEN %(set_rate)s THEN NULL ELSE rate_lowered_at END,
       updated_at = now()
 WHERE id = %(id)s AND organization_id = %(organization_id)s AND deleted_at IS NULL
RETURNING id

-- name: delete_destination
-- Remove a live destination softly; returns nothing when there is no such live destination.
UPDATE destinations SET deleted_at = now(), updated_at = now()
 WHERE id = %(id)s AND organization_id = %(organization_id)s AND deleted_at IS NULL
RETURNING id

-- name: lock_destination_forms
-- Lock the forms of a destination's live routes, in id order, before those routes are
-- removed: each removal moves its form's revision (0018), and every writer takes a form
-- before its routes.
SELECT f.id
  FROM forms f
 WHERE f.id IN (SELECT r.form_id FROM routes r
                 WHERE r.destination_id = %(destination_id)s
                   AND r.organization_id = %(organization_id)s AND r.deleted_at IS NULL)
 ORDER BY f.id
   FOR NO KEY UPDATE

-- name: forget_notice_destination
-- The organization's notices no longer go to a destination being deleted.
UPDATE organizations SET notify_destination_id = NULL
 WHERE id = %(organization_id)s AND notify_destination_id = %(id)s

-- name: delete_destination_routes
-- Remove the live routes to a destination softly (the destination is being deleted).
UPDATE routes SET deleted_at = now(), updated_at = now()
 WHERE destination_id = %(destination_id)s
   AND organization_id = %(organization_id)s
   AND deleted_at IS NULL

-- name: lock_destination_streams
-- Lock the streams of a destination's live stream routes, in id order, before those routes
-- are removed: each removal moves its stream's revision (0032).
SELECT s.id
  FROM streams s
 WHERE s.id IN (SELECT r.stream_id FROM stream_routes r
                 WHERE r.destination_id = %(destination_id)s
                   AND r.organization_id = %(organization_id)s AND r.deleted_at IS NULL)
 ORDER BY s.id
   FOR NO KEY UPDATE

-- name: delete_destination_stream_routes
-- Remove the live stream routes to a destination softly (the destination is being deleted).
UPDATE stream_routes SET deleted_at = now()
 WHERE destination_id = %(destination_id)s
   AND organization_id = %(organization_id)s
   AND deleted_at IS NULL

-- name: current_destination_secret
-- The newest secret version of a destination, deleted or not (every attempt signs with it).
SELECT version, secret FROM destination_secrets
 WHERE destination_id = %(destination_id)s AND organization_id = %(organization_id)s
 ORDER BY version DESC
 LIMIT 1

-- name: destination_secret_version
-- One secret version of a destination (older versions stay, never used to send again).
SELECT secret FROM destination_secrets
 WHERE destination_id = %(destination_id)s
   AND organization_id = %(organization_id)s
   AND version = %(version)s
