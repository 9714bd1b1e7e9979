-- name: lock_migrations
-- Serialise migration runs across processes (session-level advisory lock).
SELECT pg_advisory_lock(7261500001)

-- name: unlock_migrations
-- Release the migration lock.
SELECT pg_advisory_unlock(7261500001)

-- name: create_schema_migrations
-- The record of applied migration files.
CREATE TABLE IF NOT EXISTS schema_migrations (
    name       text PRIMARY KEY,
    checksum   text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)

-- name: applied_migrations
-- Every applied migration and its checksum.
SELECT name, checksum FROM schema_migrations ORDER BY name

-- name: record_migration
-- Record one applied migration.
INSERT INTO schema_migrations (name, checksum) VALUES (%(name)s, %(checksum)s)

-- name: record_destination_types
-- The destination types the code knows, with their attempt limits (after each migrate).
INSERT INTO destination_types (name, max_attempts)
SELECT * FROM unnest(%(names)s::text[], %(max_attempts)s::integer[])
ON CONFLICT (name) DO UPDATE SET max_attempts = EXCLUDED.max_attempts
