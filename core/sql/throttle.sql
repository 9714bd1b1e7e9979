-- name: count_auth_failure
-- Count one failure (or attempt) of a client in its window, dropping windows over a day old;
-- returns the window's count.
WITH pruned AS (
    DELETE FROM auth_failures WHERE window_start < %(window_start)s - interval '1 day'
)
INSERT INTO auth_failures (kind, client_hash, window_start, failures)
VALUES (%(kind)s, %(client_hash)s, %(window_start)s, 1)
ON CONFLICT (kind, client_hash, window_start)
DO UPDATE SET failures = auth_failures.failures + 1
RETURNING failures

-- name: forgive_auth_attempt
-- Give back an attempt that succeeded.
UPDATE auth_failures SET failures = failures - 1
 WHERE kind = %(kind)s AND client_hash = %(client_hash)s AND window_start = %(window_start)s
   AND failures > 0
