-- name: count_live_streams
-- How many streams the organization has that are not deleted.
SELECT count(*) AS n FROM streams WHERE organization_id = %(organization_id)s AND deleted_at IS NULL

-- name: insert_stream
-- A new stream.
INSERT INTO streams (id, organization_id, name, schema_mode, retention_days, accepting)
VALUES (%(id)s, %(organization_id)s, %(name)s, %(schema_mode)s, %(retention_days)s, %(accepting)s)
RETURNING id, name, schema_mode, retention_days, accepting, created_at, updated_at

-- name: list_streams
-- One page of the organization's live streams, by id, after a cursor.
SELECT id, name, schema_mode, retention_days, accepting, created_at, updated_at
  FROM streams
 WHERE organization_id = %(organization_id)s AND deleted_at IS NULL
   AND (%(after)s::text IS NULL OR id > %(after)s)
 ORDER BY id
 LIMIT %(limit)s

-- name: get_stream
-- One live stream.
SELECT id, name, schema_mode, retention_days, accepting, created_at, updated_at
  FROM streams
 WHERE id = %(id)s AND organization_id = %(organization_id)s AND deleted_at IS NULL

-- name: update_stream
-- Change a live stream's settings (every column given; the caller merged the patch).
UPDATE streams
   SET name = %(name)s, schema_mode = %(schema_mode)s, retention_days = %(retention_days)s,
       accepting = %(accepting)s, updated_at = now()
 WHERE id = %(id)s AND organization_id = %(organization_id)s AND deleted_at IS NULL
RETURNING id, name, schema_mode, retention_days, accepting, created_at, updated_at

-- name: delete_stream
-- Delete a live stream softly, revoke its ingest keys and remove its routes.
WITH gone AS (
    UPDATE streams SET deleted_at = now(), updated_at = now()
     WHERE id = %(id)s AND organization_id = %(organization_id)s AND deleted_at IS NULL
    RETURNING id
), keys AS (
    UPDATE stream_keys SET revoked_at = now()
     WHERE stream_id IN (SELECT id FROM gone) AND revoked_at IS NULL
), routes AS (
    UPDATE stream_routes SET deleted_at = now()
     WHERE stream_id IN (SELECT id FROM gone) AND deleted_at IS NULL
)
SELECT id FROM gone

-- name: insert_stream_key
-- A new ingest key of a live stream (only its hash is kept).
INSERT INTO stream_keys (id, organization_id, stream_id, name, prefix, key_hash)
SELECT %(id)s, %(organization_id)s, s.id, %(name)s, %(prefix)s, %(key_hash)s
  FROM streams s
 WHERE s.id = %(stream_id)s AND s.organization_id = %(organization_id)s AND s.deleted_at IS NULL
RETURNING id, stream_id, name, prefix, created_at

-- name: list_stream_keys
-- One page of a stream's live ingest keys, by id, after a cursor.
SELECT id, stream_id, name, prefix, created_at
  FROM stream_keys
 WHERE stream_id = %(stream_id)s AND organization_id = %(organization_id)s
   AND revoked_at IS NULL
   AND (%(after)s::text IS NULL OR id > %(after)s)
 ORDER BY id
 LIMIT %(limit)s

-- name: revoke_stream_key
-- Revoke a live ingest key of a stream at once.
UPDATE stream_keys SET revoked_at = now()
 WHERE id = %(id)s AND stream_id = %(stream_id)s AND organization_id = %(organization_id)s
   AND revoked_at IS NULL
RETURNING id

-- name: authenticate_stream_key
-- The organization and stream of a live ingest key of a live stream.
SELECT k.organization_id, k.stream_id
  FROM stream_keys k
  JOIN streams s ON s.id = k.stream_id
 WHERE k.key_hash = %(key_hash)s AND k.revoked_at IS NULL AND s.deleted_at IS NULL

-- name: ingest_context
-- What an ingest needs of a live stream, in one round trip: the stream named (with an API
-- key's organization) or the one of a live ingest key (%(key_hash)s), its settings, its
-- organization's plan and month count of events, its current schemas (the latest version
-- the owner wrote for each event type, null for the default) and its live routes to live
-- destinations.
SELECT s.id, s.organization_id, s.schema_mode, s.retention_days, s.accepting, s.revision, o.plan,
       coalesce((SELECT sum(u.events) FROM usage_counters u
                  WHERE u.organization_id = s.organization_id AND u.month = %(month)s), 0)
           AS month_events,
       coalesce((SELECT jsonb_agg(jsonb_build_object('event_type', c.event_type,
                                                     'version', c.version, 'schema', c.schema,
                                                     'source', c.source))
                   FROM (SELECT DISTINCT ON (v.event_type) v.event_type, v.version, v.schema,
                                v.source
                           FROM stream_schemas v
                          WHERE v.stream_id = s.id AND v.source = 'manual'
                          ORDER BY v.event_type, v.version DESC) c), '[]'::jsonb) AS schemas,
       coalesce((SELECT jsonb_agg(jsonb_build_object(
                            'route_id', r.id, 'event_types', r.event_types,
                            'include_statuses', r.include_statuses) ORDER BY r.id)
                   FROM stream_routes r
                   JOIN destinations d
                     ON d.id = r.destination_id AND d.organization_id = r.organization_id
                  WHERE r.stream_id = s.id AND r.enabled AND r.deleted_at IS NULL
                    AND d.deleted_at IS NULL), '[]'::jsonb) AS routes
  FROM streams s
  JOIN organizations o ON o.id = s.organization_id
 WHERE s.id = CASE WHEN %(key_hash)s::bytea IS NULL THEN %(stream_id)s::text
                   ELSE (SELECT k.stream_id FROM stream_keys k
                          WHERE k.key_hash = %(key_hash)s::bytea AND k.revoked_at IS NULL)
              END
   AND (%(key_hash)s::bytea IS NOT NULL OR s.organization_id = %(organization_id)s::text)
   AND s.deleted_at IS NULL

-- name: insert_stream_events
-- An ingest in one statement (its own transaction on the autocommit connection): unless the
-- month's count of events plus these would pass %(limit)s (null: unlimited), the events,
-- each unless its client id or idempotency key is already the stream's (those are read
-- afterwards), one delivery per planned route of each inserted event (it references the
-- event and copies none of it), and the count of the inserted events on one of the
-- month's 16 shards. With %(revision)s (the stream's settings were kept from an earlier
-- ingest: core/streams/ingest.py), nothing is stored unless the stream is still live at
-- that revision (0032) and, with %(key_hash)s, that ingest key is still a live key of it.
-- Returns the inserted events, each with the number of deliveries the statement inserted
-- (for all of them: counted once, not per event), or one row with `over` when the month's
-- count refused them all, or with `stale` when the kept settings were not confirmed.
WITH gate AS MATERIALIZED (
    SELECT g.stale,
           NOT g.stale AND %(limit)s::integer IS NOT NULL
           AND coalesce((SELECT sum(u.events) FROM usage_counters u
                          WHERE u.organization_id = %(organization_id)s
                            AND u.month = %(month)s), 0)
               + jsonb_array_length(%(events)s::jsonb) > %(limit)s::integer AS over
      FROM (SELECT %(revision)s::bigint IS NOT NULL AND NOT EXISTS (
                SELECT 1 FROM streams s
                 WHERE s.id = %(stream_id)s AND s.revision = %(revision)s::bigint
                   AND s.deleted_at IS NULL
                   AND (%(key_hash)s::bytea IS NULL OR EXISTS (
                           SELECT 1 FROM stream_keys k
                            WHERE k.key_hash = %(key_hash)s::bytea AND k.stream_id = s.id
                              AND k.revoked_at IS NULL))) AS stale) g
), input AS (
    SELECT e.* FROM jsonb_to_recordset(%(events)s::jsonb) AS e(
        id text, client_id text, idempotency_key text, type text, status text, reason text,
        schema_errors jsonb, schema_version integer, data jsonb, payload_hash text,
        occurred_at timestamptz, retention_days integer, n integer)
     WHERE NOT (SELECT over OR stale FROM gate)
), event AS (
    INSERT INTO stream_events (id, organization_id, stream_id, client_id, idempotency_key,
                               type, status, reason, schema_errors, schema_version, data,
                               payload_hash, occurred_at, received_at, erase_at)
    SELECT e.id, %(organization_id)s, %(stream_id)s, e.client_id, e.idempotency_key, e.type,
           e.status, e.reason, e.schema_errors, e.schema_version, e.data,
           decode(e.payload_hash, 'hex'), e.occurred_at, %(now)s,
           %(now)s + make_interval(days => e.retention_days)
      FROM input e
     ORDER BY e.n
    ON CONFLICT DO NOTHING
    RETURNING id
), delivery AS (
    INSERT INTO deliveries (id, organization_id, kind, event_id, stream_route_id,
                            destination_id, channel, max_attempts, next_attempt_at, target,
                            secret_version)
    SELECT p.id, %(organization_id)s, 'event', p.event_id, r.id, d.id, d.type,
           t.max_attempts, %(now)s, d.config,
           (SELECT max(v.version) FROM destination_secrets v WHERE v.destination_id = d.id)
      FROM jsonb_to_recordset(%(deliveries)s::jsonb) AS p(id text, event_id text, route_id text)
      JOIN event e ON e.id = p.event_id
      JOIN stream_routes r ON r.id = p.route_id AND r.enabled AND r.deleted_at IS NULL
      JOIN destinations d
        ON d.id = r.destination_id AND d.organization_id = r.organization_id
       AND d.deleted_at IS NULL
      JOIN destination_types t ON t.name = d.type
    RETURNING event_id
), counted AS (
    INSERT INTO usage_counters AS u (organization_id, month, shard, events)
    SELECT %(organization_id)s, %(month)s, 1 + floor(random() * 63)::smallint, c.n
      FROM (SELECT count(*) AS n FROM event) c
     WHERE c.n > 0
    ON CONFLICT (organization_id, month, shard) DO UPDATE SET events = u.events + excluded.events
)
SELECT e.id, false AS over, false AS stale, (SELECT count(*) FROM delivery) AS deliveries
  FROM event e
UNION ALL
SELECT NULL, g.over, g.stale, 0 FROM gate g WHERE g.over OR g.stale

-- name: find_stream_events
-- The stream's events stored under these client ids or idempotency keys.
SELECT id, client_id, idempotency_key, status, payload_hash
  FROM stream_events
 WHERE stream_id = %(stream_id)s
   AND (client_id = ANY (%(client_ids)s::text[])
        OR idempotency_key = ANY (%(idempotency_keys)s::text[]))

-- name: lock_stream
-- Lock a live stream's row (schema versions are appended one at a time under it).
SELECT s.id, o.plan
  FROM streams s JOIN organizations o ON o.id = s.organization_id
 WHERE s.id = %(id)s AND s.organization_id = %(organization_id)s AND s.deleted_at IS NULL
   FOR UPDATE OF s

-- name: count_stream_schemas
-- How many schema versions a stream has.
SELECT count(*) AS n FROM stream_schemas
 WHERE stream_id = %(stream_id)s AND organization_id = %(organization_id)s

-- name: insert_stream_schema
-- Append a stream's next schema version (`manual`, or `suggested` by inference).
INSERT INTO stream_schemas (organization_id, stream_id, version, event_type, schema, source)
SELECT %(organization_id)s, %(stream_id)s, coalesce(max(version), 0) + 1, %(event_type)s,
       %(schema)s, %(source)s
  FROM stream_schemas
 WHERE stream_id = %(stream_id)s
RETURNING version, event_type, schema, source, created_at

-- name: get_stream_schema
-- One schema version of a stream.
SELECT version, event_type, schema, source, created_at
  FROM stream_schemas
 WHERE stream_id = %(stream_id)s AND organization_id = %(organization_id)s
   AND version = %(version)s

-- name: stream_event_samples
-- The data of a stream's newest events (of one type, when given) that still hold it.
SELECT data
  FROM stream_events
 WHERE stream_id = %(stream_id)s AND organization_id = %(organization_id)s
   AND data IS NOT NULL
   AND (%(event_type)s::text IS NULL OR type = %(event_type)s)
 ORDER BY id DESC
 LIMIT %(limit)s

-- name: list_stream_schemas
-- One page of a stream's schema versions, oldest first, after a version.
SELECT version, event_type, schema, source, created_at
  FROM stream_schemas
 WHERE stream_id = %(stream_id)s AND organization_id = %(organization_id)s
   AND (%(after)s::integer IS NULL OR version > %(after)s)
 ORDER BY version
 LIMIT %(limit)s

-- name: insert_stream_route
-- A route from a live stream to a live destination of the same organization.
INSERT INTO stream_routes (id, organization_id, stream_id, destination_id, enabled,
                           event_types, include_statuses)
SELECT %(id)s, %(organization_id)s, s.id, d.id, %(enabled)s, %(event_types)s,
       %(include_statuses)s
  FROM streams s
  JOIN destinations d ON d.organization_id = s.organization_id
 WHERE s.id = %(stream_id)s AND s.organization_id = %(organization_id)s
   AND s.deleted_at IS NULL AND d.id = %(destination_id)s AND d.deleted_at IS NULL
RETURNING id, stream_id, destination_id, enabled, event_types, include_statuses, created_at

-- name: list_stream_routes
-- One page of a stream's live routes, by id, after a cursor.
SELECT id, stream_id, destination_id, enabled, event_types, include_statuses, created_at
  FROM stream_routes
 WHERE stream_id = %(stream_id)s AND organization_id = %(organization_id)s
   AND deleted_at IS NULL
   AND (%(after)s::text IS NULL OR id > %(after)s)
 ORDER BY id
 LIMIT %(limit)s

-- name: delete_stream_route
-- Remove a live route of a stream softly (its queued deliveries are kept).
UPDATE stream_routes SET deleted_at = now()
 WHERE id = %(id)s AND stream_id = %(stream_id)s AND organization_id = %(organization_id)s
   AND deleted_at IS NULL
RETURNING id

-- name: list_stream_events
-- One page of a stream's events, newest first, before a cursor, by type and status.
SELECT id, client_id, type, status, reason, schema_errors, schema_version, data,
       occurred_at, received_at, erase_at, erased_at, erase_reason, released_at
  FROM stream_events
 WHERE stream_id = %(stream_id)s AND organization_id = %(organization_id)s
   AND (%(type)s::text IS NULL OR type = %(type)s)
   AND (%(status)s::text IS NULL OR status = %(status)s)
   AND (%(before)s::text IS NULL OR id < %(before)s)
 ORDER BY id DESC
 LIMIT %(limit)s

-- name: get_stream_event
-- One event of a stream.
SELECT id, client_id, type, status, reason, schema_errors, schema_version, data,
       occurred_at, received_at, erase_at, erased_at, erase_reason, released_at
  FROM stream_events
 WHERE id = %(id)s AND stream_id = %(stream_id)s AND organization_id = %(organization_id)s

-- name: stream_event_deliveries
-- The deliveries of one event, oldest first.
SELECT id, destination_id, channel, status, reason, attempts, next_attempt_at, last_detail,
       created_at, sent_at
  FROM deliveries
 WHERE event_id = %(event_id)s AND organization_id = %(organization_id)s
 ORDER BY id

-- name: erase_stream_events
-- Erase events' data at once (kept: ids, types, statuses and times), with every trace of
-- it: their deliveries build their bodies from the event, so none holds a copy; those not
-- sent end `skipped` (%(skip_reason)s), and what receivers answered (attempt excerpts, a
-- service's error text after an HTTP status) goes. Returns the events erased now.
WITH erased AS (
    UPDATE stream_events
       SET data = NULL, schema_errors = NULL, erased_at = %(now)s, erase_reason = %(reason)s
     WHERE id = ANY (%(ids)s::text[]) AND erased_at IS NULL
    RETURNING id, organization_id
), delivery AS (
    UPDATE deliveries d
       SET status = CASE WHEN d.status IN ('pending', 'failed') THEN 'skipped' ELSE d.status END,
           reason = CASE WHEN d.status IN ('pending', 'failed') THEN %(skip_reason)s
                         ELSE regexp_replace(d.reason, '(http_[0-9]{3}): .*?(\)?)$', '\1\2') END,
           last_detail = regexp_replace(d.last_detail, '(http_[0-9]{3}): .*?(\)?)$', '\1\2'),
           updated_at = %(now)s
      FROM erased e
     WHERE d.event_id = e.id
    RETURNING d.id
), attempt AS (
    UPDATE delivery_attempts a SET response_excerpt = NULL
      FROM delivery d
     WHERE a.delivery_id = d.id AND a.response_excerpt IS NOT NULL
)
SELECT id FROM erased

-- name: expired_stream_events
-- A batch of events past their retention, locked for this transaction's erase.
SELECT id FROM stream_events
 WHERE erased_at IS NULL AND erase_at <= %(now)s
 ORDER BY erase_at
 LIMIT %(limit)s
   FOR UPDATE SKIP LOCKED

-- name: lock_stream_event
-- One event of a stream, locked against a concurrent erase.
SELECT id, erased_at FROM stream_events
 WHERE id = %(id)s AND stream_id = %(stream_id)s AND organization_id = %(organization_id)s
   FOR UPDATE
