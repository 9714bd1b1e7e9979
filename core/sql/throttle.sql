-- name: count_attempt
-- Count one attempt (or failure) on its first counter (a client) and, when that is within
-- its limit, on its second (an account), in one statement: concurrent attempts each get a
-- count of their own, so none slips under a limit, and the counters are always taken in
-- this order. Windows over a day old are dropped. The two counts (the second's is null
-- when it was not counted).
WITH pruned AS (
    DELETE FROM auth_failures WHERE window_start < %(window_start)s - interval '1 day'
), first AS (
    INSERT INTO auth_failures (kind, client_hash, window_start, failures)
    VALUES (%(kind)s, %(client_hash)s, %(window_start)s, 1)
    ON CONFLICT (kind, client_hash, window_start)
    DO UPDATE SET failures = auth_failures.failures + 1
    RETURNING failures
), second AS (
    INSERT INTO auth_failures (kind, client_hash, window_start, failures)
    SELECT %(then_kind)s, %(then_hash)s, %(window_start)s, 1
      FROM first
     WHERE %(then_hash)s::bytea IS NOT NULL AND first.failures <= %(limit)s
    ON CONFLICT (kind, client_hash, window_start)
    DO UPDATE SET failures = auth_failures.failures + 1
    RETURNING failures
)
SELECT first.failures, second.failures AS then_failures
  FROM first LEFT JOIN second ON true

-- name: forgive_attempt
-- Give back an attempt that succeeded, on each counter it was counted on.
UPDATE auth_failures SET failures = failures - 1
  FROM unnest(%(kinds)s::text[], %(client_hashes)s::bytea[]) AS counter (kind, client_hash)
 WHERE auth_failures.kind = counter.kind AND auth_failures.client_hash = counter.client_hash
   AND auth_failures.window_start = %(window_start)s AND auth_failures.failures > 0
