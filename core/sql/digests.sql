-- name: digest_routes
-- A page of live digest routes (by id, after a cursor) with live destinations, with what a
-- digest delivery snapshots and where the last digest ended.
SELECT r.id, r.organization_id, r.form_id, r.destination_id, r.include_statuses, r.period,
       r.template, r.updated_at, f.name AS form_name, d.type AS channel, d.config,
       (SELECT max(v.version) FROM destination_secrets v WHERE v.destination_id = d.id)
           AS secret_version,
       (SELECT max(g.period_end) FROM digests g WHERE g.route_id = r.id) AS last_end
  FROM routes r
  JOIN forms f ON f.id = r.form_id AND f.deleted_at IS NULL
  JOIN destinations d ON d.id = r.destination_id AND d.deleted_at IS NULL
 WHERE r.mode = 'digest' AND r.enabled AND r.deleted_at IS NULL
   AND (%(after)s::text IS NULL OR r.id > %(after)s::text)
 ORDER BY r.id
 LIMIT %(limit)s

-- name: first_undigested_submission
-- The arrival time of the route's oldest matching submission in [since, until).
SELECT received_at FROM submissions
 WHERE form_id = %(form_id)s AND status = ANY (%(statuses)s::text[])
   AND received_at >= %(since)s AND received_at < %(until)s
 ORDER BY received_at
 LIMIT 1

-- name: digest_submissions
-- The count of a period's matching submissions and the first 100, oldest first, with values
-- only while readable.
SELECT (SELECT count(*) FROM submissions
         WHERE form_id = %(form_id)s AND status = ANY (%(statuses)s::text[])
           AND received_at >= %(start)s AND received_at < %(end)s) AS total,
       coalesce((SELECT jsonb_agg(jsonb_strip_nulls(jsonb_build_object(
                     'receipt', s.id, 'submitted_at', s.received_at,
                     'values', CASE WHEN s.erased_at IS NULL
                                     AND (s.erase_at IS NULL OR s.erase_at > %(now)s)
                                    THEN s."values" END)) ORDER BY s.received_at, s.id)
                   FROM (SELECT * FROM submissions
                          WHERE form_id = %(form_id)s AND status = ANY (%(statuses)s::text[])
                            AND received_at >= %(start)s AND received_at < %(end)s
                          ORDER BY received_at, id
                          LIMIT %(listed)s) s), '[]'::jsonb) AS listed

-- name: insert_digest
-- One digest of a route's period and its delivery; a digest already made for the period
-- (a rerun, a concurrent pass) makes this a no-op.
WITH digest AS (
    INSERT INTO digests (id, organization_id, route_id, period_key, period_start, period_end,
                         submission_count, created_at)
    VALUES (%(id)s, %(organization_id)s, %(route_id)s, %(period_key)s, %(start)s, %(end)s,
            %(count)s, %(now)s)
    ON CONFLICT ON CONSTRAINT digests_route_period_key DO NOTHING
    RETURNING id
), delivery AS (
    INSERT INTO deliveries (id, organization_id, kind, digest_id, route_id, destination_id,
                            channel, max_attempts, next_attempt_at, payload, target, template,
                            secret_version, created_at, updated_at)
    SELECT %(delivery_id)s, %(organization_id)s, 'digest', digest.id, %(route_id)s,
           %(destination_id)s, %(channel)s,
           (SELECT t.max_attempts FROM destination_types t WHERE t.name = %(channel)s),
           %(now)s, %(payload)s,
           %(target)s, NULL, %(secret_version)s, %(now)s, %(now)s
      FROM digest
    RETURNING id
)
SELECT digest.id, (SELECT id FROM delivery) AS delivery_id FROM digest

-- name: list_digests
-- One page of the organization's digests, newest first, optionally of one route.
SELECT g.id, g.route_id, g.period_key, g.period_start, g.period_end, g.submission_count,
       g.created_at, d.id AS delivery_id, d.status AS delivery_status
  FROM digests g
  LEFT JOIN deliveries d ON d.digest_id = g.id
 WHERE g.organization_id = %(organization_id)s
   AND (%(route_id)s::text IS NULL OR g.route_id = %(route_id)s::text)
   AND (%(before)s::text IS NULL OR g.id < %(before)s::text)
 ORDER BY g.id DESC
 LIMIT %(limit)s
