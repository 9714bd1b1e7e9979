-- name: claim_due
-- Claim due deliveries (and expired leases) into `sending`, round-robin across organizations.
-- Each organization with due rows is visited once (a skip scan over deliveries_org_due_idx,
-- at most %(max_orgs)s of them) and gives at most 4 x limit / organizations candidates, so
-- a batch fills up whatever the skew while the candidates stay O(limit + organizations);
-- candidates are taken by turn (every organization's first, then every second…), so a
-- backlog cannot crowd out another tenant's single delivery.
WITH RECURSIVE orgs AS (
    (SELECT organization_id FROM deliveries
      WHERE status IN ('pending', 'failed') AND NOT held AND next_attempt_at <= %(now)s
      ORDER BY organization_id LIMIT 1)
    UNION ALL
    SELECT (SELECT d.organization_id FROM deliveries d
             WHERE d.status IN ('pending', 'failed') AND NOT d.held
               AND d.next_attempt_at <= %(now)s AND d.organization_id > orgs.organization_id
             ORDER BY d.organization_id LIMIT 1)
      FROM orgs WHERE orgs.organization_id IS NOT NULL
),
org_list AS MATERIALIZED (
    SELECT organization_id FROM orgs WHERE organization_id IS NOT NULL LIMIT %(max_orgs)s
),
due AS (
    SELECT c.id, c.organization_id, c.next_attempt_at AS due_at
      FROM org_list o
     CROSS JOIN LATERAL (
        SELECT d.id, d.organization_id, d.next_attempt_at FROM deliveries d
         WHERE d.organization_id = o.organization_id
           AND d.status IN ('pending', 'failed') AND NOT d.held
           AND d.next_attempt_at <= %(now)s
         ORDER BY d.next_attempt_at
         LIMIT (SELECT least(%(limit)s, ceil(4 * %(limit)s::numeric / greatest(count(*), 1)))
                  FROM org_list)) c
),
expired AS (
    SELECT id, organization_id, claimed_until AS due_at FROM deliveries
     WHERE status = 'sending' AND claimed_until < %(now)s
     ORDER BY claimed_until LIMIT %(limit)s
),
ranked AS (
    SELECT id, due_at,
           row_number() OVER (PARTITION BY organization_id ORDER BY due_at) AS turn
      FROM (SELECT * FROM due UNION ALL SELECT * FROM expired) candidates
),
picked AS (
    -- One primary-key probe per candidate, in turn order, until the batch is full: the
    -- size of the table (its sent history) never enters the claim.
    SELECT l.id
      FROM (SELECT id, turn, due_at FROM ranked ORDER BY turn, due_at) r
     CROSS JOIN LATERAL (
        SELECT d.id FROM deliveries d WHERE d.id = r.id FOR UPDATE SKIP LOCKED) l
     LIMIT %(limit)s
),
claimed AS (
    -- Re-checked under the lock: another worker may have claimed a row since our snapshot.
    UPDATE deliveries d
       SET status = 'sending', claim_token = gen_random_uuid(),
           claimed_until = %(now)s + %(lease)s, updated_at = %(now)s
      FROM picked
     WHERE d.id = picked.id
       AND ((d.status IN ('pending', 'failed') AND NOT d.held AND d.next_attempt_at <= %(now)s)
            OR (d.status = 'sending' AND d.claimed_until < %(now)s))
    RETURNING d.*
)
SELECT c.id, c.organization_id, c.kind, c.submission_id, c.destination_id, c.channel,
       c.attempts, c.max_attempts, c.claim_token, c.payload, c.target, c.template,
       c.secret_version, ds.secret, s.form_id,
       s.erased_at, s.erase_at, dst.deleted_at AS destination_deleted_at,
       dst.enabled AS destination_enabled, dst.health AS destination_health,
       dst.probe_after AS destination_probe_after,
       dst.consecutive_failures AS destination_failures,
       (s.id IS NOT NULL AND 'over_quota' = ANY (s.flags)
        AND coalesce(u.submissions, 0) > (%(limits)s::jsonb ->> o.plan)::integer)
           IS TRUE AS over_quota
  FROM claimed c
  JOIN organizations o ON o.id = c.organization_id
  LEFT JOIN submissions s ON s.id = c.submission_id
  LEFT JOIN destinations dst ON dst.id = c.destination_id
  LEFT JOIN destination_secrets ds
         ON ds.destination_id = c.destination_id AND ds.version = c.secret_version
  LEFT JOIN usage_counters u ON u.organization_id = c.organization_id AND u.month = %(month)s

-- name: finish_deliveries
-- Write claims' outcomes, each fenced by its token, with their attempts and events, in one
-- statement (%(outcomes)s: a JSON array, one object per outcome). An
-- outcome whose claim has expired and been taken again writes nothing but its attempt (as
-- `fenced`). Returns the (id, claim_token) of the outcomes written.
WITH o AS MATERIALIZED (
    SELECT * FROM jsonb_to_recordset(%(outcomes)s::jsonb) AS o (
        id text, organization_id text, claim_token uuid, status text, spent integer,
        next_attempt_at timestamptz, reason text, detail text, now timestamptz,
        attempt integer, started_at timestamptz, duration_ms integer, http_status integer,
        error_class text, excerpt text, event text, event_data jsonb)
),
done AS (
    UPDATE deliveries d
       SET status = o.status, attempts = d.attempts + o.spent,
           next_attempt_at = coalesce(o.next_attempt_at, d.next_attempt_at),
           reason = o.reason, last_detail = o.detail,
           sent_at = CASE WHEN o.status = 'sent' THEN o.now ELSE d.sent_at END,
           claim_token = NULL, claimed_until = NULL, throttled = false, updated_at = o.now
      FROM o
     WHERE d.id = o.id AND d.claim_token = o.claim_token AND d.status = 'sending'
    RETURNING d.id, o.claim_token, d.organization_id, d.attempts
),
attempt AS (
    INSERT INTO delivery_attempts (organization_id, delivery_id, attempt, claim_token,
                                   started_at, duration_ms, outcome, http_status,
                                   error_class, response_excerpt)
    SELECT o.organization_id, o.id, o.attempt, o.claim_token, o.started_at, o.duration_ms,
           CASE WHEN EXISTS (SELECT 1 FROM done
                              WHERE done.id = o.id AND done.claim_token = o.claim_token)
                THEN o.status ELSE 'fenced' END,
           o.http_status, o.error_class, o.excerpt
      FROM o
     WHERE o.spent = 1
),
event AS (
    INSERT INTO events (organization_id, type, subject_id, data, created_at)
    SELECT done.organization_id, o.event, done.id,
           o.event_data || jsonb_build_object('attempts', done.attempts), o.now
      FROM done
      JOIN o ON o.id = done.id AND o.claim_token = done.claim_token
     WHERE o.event IS NOT NULL
)
SELECT id, claim_token FROM done

-- name: release_claim
-- Give a claimed row back without spending an attempt: held for quota, or pushed back
-- behind a failing destination's probe (fenced like an outcome).
UPDATE deliveries
   SET status = CASE WHEN attempts > 0 THEN 'failed' ELSE 'pending' END,
       held = %(held)s, throttled = %(throttled)s,
       next_attempt_at = greatest(next_attempt_at, %(next_attempt_at)s),
       last_detail = %(detail)s, claim_token = NULL, claimed_until = NULL, updated_at = %(now)s
 WHERE id = %(id)s AND claim_token = %(claim_token)s AND status = 'sending'
RETURNING id

-- name: release_held
-- Un-hold the deliveries of organizations no longer over their monthly quota (an upgrade,
-- or a new month).
UPDATE deliveries d
   SET held = false, updated_at = %(now)s
  FROM organizations o
 WHERE d.held AND o.id = d.organization_id
   AND o.id IN (SELECT DISTINCT organization_id FROM deliveries WHERE held)
   AND (coalesce((SELECT u.submissions FROM usage_counters u
                   WHERE u.organization_id = o.id AND u.month = %(month)s), 0)
        > (%(limits)s::jsonb ->> o.plan)::integer) IS NOT TRUE
RETURNING d.id

-- name: destination_failed
-- Count a failed send against a healthy destination, or a failed probe of a failing one
-- (failures of sends already in flight when it turned failing are not counted again). At
-- the threshold it is `failing`, and the next probe waits a window: 30 s, doubling with
-- each failed probe, at most 6 h. Returns nothing for an uncounted failure.
UPDATE destinations
   SET consecutive_failures = consecutive_failures + 1,
       health = CASE WHEN consecutive_failures + 1 >= %(threshold)s THEN 'failing'
                     ELSE health END,
       probe_after = CASE WHEN consecutive_failures + 1 >= %(threshold)s
           THEN %(now)s + make_interval(secs =>
                least(power(2, consecutive_failures + 1 - %(threshold)s) * %(base)s, %(cap)s))
           ELSE probe_after END
 WHERE id = %(id)s AND (health = 'healthy' OR %(probe)s)
RETURNING health, probe_after

-- name: promote_parked
-- Make one parked delivery the next probe of a failing destination, due when the window ends.
UPDATE deliveries
   SET next_attempt_at = %(at)s, updated_at = %(now)s
 WHERE id = (SELECT id FROM deliveries
              WHERE destination_id = %(id)s AND throttled AND status IN ('pending', 'failed')
              ORDER BY next_attempt_at, id LIMIT 1)

-- name: destination_succeeded
-- A success restores a destination; returns a row only when it was not already healthy.
UPDATE destinations
   SET consecutive_failures = 0, health = 'healthy', probe_after = NULL
 WHERE id = %(id)s AND (consecutive_failures > 0 OR health <> 'healthy')
RETURNING id

-- name: release_throttled
-- Queue now every delivery that was waiting behind a destination's probe.
UPDATE deliveries
   SET throttled = false, next_attempt_at = %(now)s, updated_at = %(now)s
 WHERE destination_id = %(id)s AND throttled AND status IN ('pending', 'failed')

-- name: take_probe
-- Let exactly one delivery probe a failing destination per window; returns the window's end.
UPDATE destinations
   SET probe_after = %(now)s + make_interval(secs =>
           least(power(2, greatest(consecutive_failures - %(threshold)s, 0)) * %(base)s,
                 %(cap)s))
 WHERE id = %(id)s AND health = 'failing' AND (probe_after IS NULL OR probe_after <= %(now)s)
RETURNING probe_after

-- name: destination_probe_after
-- When a failing destination's current probe window ends.
SELECT health, probe_after FROM destinations WHERE id = %(id)s
