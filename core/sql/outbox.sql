-- name: claim_due
-- Claim due deliveries (and expired leases) into `sending`, fair across organizations and
-- across destinations within each, never more of a destination than its limit of sends in
-- flight allows now, nor more than its rate's bucket holds whole tokens (0029).
-- Organizations with due rows are visited once each (a skip scan over
-- deliveries_org_due_idx), at most %(max_orgs)s of them, starting after the one the last
-- claim visited last (outbox_claim_cursor), so with more organizations due than a claim
-- visits each gets its turn. Within an organization the due destinations are visited the
-- same way; a destination whose sends in flight (live leases) fill its limit is passed
-- over, and each other one gives at most its free room. Candidates are taken by turn
-- (every organization's first, then every second…, a destination's rows alternating with
-- its siblings'), so a backlog, of a tenant or of a slow destination, crowds out no one.
-- A destination with a rate whose bucket (as of this statement's snapshot) holds no whole
-- token is passed over like a full one; the others' buckets are read again under their
-- rows' locks (SKIP LOCKED: one another claim is charging is passed over this time), give
-- at most their whole tokens, and pay one per row claimed.
-- Claiming spends an attempt (a crash or an expired lease counts); an expired lease's lost
-- attempt is recorded as `interrupted`. Outcomes that make no send give the attempt back.
WITH RECURSIVE start AS MATERIALIZED (
    SELECT coalesce(visited_org, '') AS after FROM outbox_claim_cursor
),
after_start AS (
    (SELECT d.organization_id FROM deliveries d
      WHERE d.status IN ('pending', 'failed') AND NOT d.held AND d.next_attempt_at <= %(now)s
        AND d.organization_id > (SELECT after FROM start)
      ORDER BY d.organization_id LIMIT 1)
    UNION ALL
    SELECT (SELECT d.organization_id FROM deliveries d
             WHERE d.status IN ('pending', 'failed') AND NOT d.held
               AND d.next_attempt_at <= %(now)s AND d.organization_id > o.organization_id
             ORDER BY d.organization_id LIMIT 1)
      FROM after_start o WHERE o.organization_id IS NOT NULL
),
up_to_start AS (
    (SELECT d.organization_id FROM deliveries d
      WHERE d.status IN ('pending', 'failed') AND NOT d.held AND d.next_attempt_at <= %(now)s
      ORDER BY d.organization_id LIMIT 1)
    UNION ALL
    SELECT (SELECT d.organization_id FROM deliveries d
             WHERE d.status IN ('pending', 'failed') AND NOT d.held
               AND d.next_attempt_at <= %(now)s AND d.organization_id > o.organization_id
             ORDER BY d.organization_id LIMIT 1)
      FROM up_to_start o WHERE o.organization_id < (SELECT after FROM start)
),
org_list AS MATERIALIZED (
    SELECT organization_id, row_number() OVER () AS visit FROM (
        (SELECT organization_id FROM after_start
          WHERE organization_id IS NOT NULL LIMIT %(max_orgs)s)
        UNION ALL
        (SELECT organization_id FROM up_to_start
          WHERE organization_id IS NOT NULL AND organization_id <= (SELECT after FROM start)
          LIMIT %(max_orgs)s)
        LIMIT %(max_orgs)s) visited
),
share AS MATERIALIZED (
    -- Candidates an organization may give: 4 x limit shared out, so the batch fills up
    -- whatever the skew while the candidates stay O(limit + organizations).
    SELECT least(%(limit)s, ceil(4 * %(limit)s::numeric / greatest(count(*), 1)))::integer AS n
      FROM org_list
),
dests AS MATERIALIZED (
    SELECT o.organization_id, w.destination_id, w.room
      FROM org_list o
     CROSS JOIN LATERAL (
        WITH RECURSIVE walk AS (
            (SELECT d.destination_id FROM deliveries d
              WHERE d.organization_id = o.organization_id AND d.destination_id IS NOT NULL
                AND d.status IN ('pending', 'failed') AND NOT d.held
                AND d.next_attempt_at <= %(now)s
              ORDER BY d.destination_id LIMIT 1)
            UNION ALL
            SELECT (SELECT d.destination_id FROM deliveries d
                     WHERE d.organization_id = o.organization_id
                       AND d.destination_id > w.destination_id
                       AND d.status IN ('pending', 'failed') AND NOT d.held
                       AND d.next_attempt_at <= %(now)s
                     ORDER BY d.destination_id LIMIT 1)
              FROM walk w WHERE w.destination_id IS NOT NULL
        )
        SELECT w.destination_id, r.room
          FROM walk w
         CROSS JOIN LATERAL (
            SELECT least(
                       (SELECT least(coalesce(t.send_limit, %(per_destination)s),
                                     %(per_destination)s)
                          FROM destinations t WHERE t.id = w.destination_id)
                       - (SELECT count(*) FROM deliveries f
                           WHERE f.destination_id = w.destination_id AND f.status = 'sending'
                             AND f.claimed_until >= %(now)s),
                       (SELECT floor(postbag_rate_tokens(
                                   postbag_send_rate(
                                       postbag_rate_of(t.rate_per_second, t.type,
                                                       %(type_rates)s),
                                       t.rate_lowered, t.rate_lowered_at, %(now)s, %(recover)s),
                                   t.rate_tokens, t.rate_updated_at, %(now)s))::integer
                          FROM destinations t WHERE t.id = w.destination_id)) AS room
            OFFSET 0) r
         WHERE w.destination_id IS NOT NULL AND r.room > 0
         LIMIT (SELECT n FROM share)) w
),
due AS (
    SELECT c.id, c.organization_id, c.destination_id, c.due_at,
           row_number() OVER (PARTITION BY c.organization_id ORDER BY c.nth, c.due_at) AS turn
      FROM (
        SELECT d.*, row_number() OVER (PARTITION BY d.organization_id, d.destination_id
                                       ORDER BY d.due_at, d.id) AS nth
          FROM (
            SELECT d.* FROM dests x
             CROSS JOIN LATERAL (
                SELECT d.id, d.organization_id, d.destination_id, d.next_attempt_at AS due_at
                  FROM deliveries d
                 WHERE d.organization_id = x.organization_id
                   AND d.destination_id = x.destination_id
                   AND d.status IN ('pending', 'failed') AND NOT d.held
                   AND d.next_attempt_at <= %(now)s
                 ORDER BY d.next_attempt_at
                 LIMIT least(x.room, (SELECT n FROM share))) d
            UNION ALL
            -- Acknowledgement emails have no destination, and no destination's limit.
            SELECT d.* FROM org_list o
             CROSS JOIN LATERAL (
                SELECT d.id, d.organization_id, d.destination_id, d.next_attempt_at AS due_at
                  FROM deliveries d
                 WHERE d.organization_id = o.organization_id AND d.destination_id IS NULL
                   AND d.status IN ('pending', 'failed') AND NOT d.held
                   AND d.next_attempt_at <= %(now)s
                 ORDER BY d.next_attempt_at
                 LIMIT (SELECT n FROM share)) d) d) c
),
expired AS (
    SELECT id, organization_id, destination_id, claimed_until AS due_at, 0::bigint AS turn
      FROM deliveries
     WHERE status = 'sending' AND claimed_until < %(now)s
     ORDER BY claimed_until LIMIT %(limit)s
),
candidates AS MATERIALIZED (
    SELECT id, organization_id, destination_id, due_at, turn FROM due
    UNION ALL
    SELECT id, organization_id, destination_id, due_at, turn FROM expired
),
rooms AS MATERIALIZED (
    -- Expired leases come on top of a destination's due rows: the limits hold for both. A
    -- destination with a rate gives at most the whole tokens its bucket holds, read under
    -- its row's lock (none when another claim holds it).
    SELECT x.destination_id,
           CASE WHEN s.rated AND b.tokens IS NULL THEN 0
                ELSE least(s.room, floor(b.tokens))::integer END AS room,
           b.full_rate, b.rate, b.tokens
      FROM (SELECT DISTINCT destination_id FROM candidates
             WHERE destination_id IS NOT NULL) x
     CROSS JOIN LATERAL (
        SELECT least(coalesce(t.send_limit, %(per_destination)s), %(per_destination)s)
               - (SELECT count(*) FROM deliveries f
                   WHERE f.destination_id = x.destination_id AND f.status = 'sending'
                     AND f.claimed_until >= %(now)s) AS room,
               postbag_rate_of(t.rate_per_second, t.type, %(type_rates)s) IS NOT NULL AS rated
          FROM destinations t WHERE t.id = x.destination_id) s
      LEFT JOIN LATERAL (
        SELECT f.full_rate, r.rate,
               postbag_rate_tokens(r.rate, t.rate_tokens, t.rate_updated_at, %(now)s) AS tokens
          FROM destinations t
         CROSS JOIN LATERAL (
            SELECT postbag_rate_of(t.rate_per_second, t.type, %(type_rates)s) AS full_rate) f
         CROSS JOIN LATERAL (
            SELECT postbag_send_rate(f.full_rate, t.rate_lowered, t.rate_lowered_at, %(now)s,
                                     %(recover)s) AS rate) r
         WHERE t.id = x.destination_id AND s.rated
           FOR NO KEY UPDATE OF t SKIP LOCKED) b ON true
),
ranked AS (
    SELECT c.id, c.turn, c.due_at
      FROM (SELECT c.*, row_number() OVER (PARTITION BY c.destination_id
                                           ORDER BY c.turn, c.due_at) AS nth
              FROM candidates c) c
      LEFT JOIN rooms r ON r.destination_id = c.destination_id
     WHERE c.destination_id IS NULL OR c.nth <= r.room
),
picked AS (
    -- One primary-key probe per candidate, in turn order, until the batch is full: the
    -- size of the table (its sent history) never enters the claim.
    SELECT l.id, l.status AS was, l.claim_token AS lost_token, l.claimed_until AS lost_until
      FROM (SELECT id, turn, due_at FROM ranked ORDER BY turn, due_at) r
     CROSS JOIN LATERAL (
        SELECT d.id, d.status, d.claim_token, d.claimed_until
          FROM deliveries d WHERE d.id = r.id FOR UPDATE SKIP LOCKED) l
     LIMIT %(limit)s
),
claimed AS (
    -- Re-checked under the lock: another worker may have claimed a row since our snapshot.
    -- Each attempt is aimed at its destination as it is now: the destination's stored config
    -- and newest secret version replace what the delivery recorded, so a URL, chat or
    -- address its owner replaced (or a secret they rotated) is never used again, by an
    -- automatic retry, a retry by hand or a replay alike (docs/delivery.md#where-an-attempt-goes).
    -- A delivery without a destination (an acknowledgement, a notice) keeps its own.
    UPDATE deliveries d
       SET status = 'sending', attempts = d.attempts + 1, claim_token = gen_random_uuid(),
           claimed_until = %(now)s + %(lease)s, updated_at = %(now)s,
           target = coalesce((SELECT t.config FROM destinations t WHERE t.id = d.destination_id),
                             d.target),
           secret_version = CASE WHEN d.destination_id IS NULL THEN d.secret_version
               ELSE (SELECT max(v.version) FROM destination_secrets v
                      WHERE v.destination_id = d.destination_id) END
      FROM picked
     WHERE d.id = picked.id
       AND ((d.status IN ('pending', 'failed') AND NOT d.held AND d.next_attempt_at <= %(now)s)
            OR (d.status = 'sending' AND d.claimed_until < %(now)s))
    RETURNING d.*, CASE WHEN picked.was = 'sending' THEN picked.lost_token END AS lost_token,
              picked.lost_until
),
charged AS (
    -- Each destination with a rate pays a token per row claimed; while its bucket is left
    -- without a whole token, `rate_next_at` says when the next is due (a millisecond late,
    -- so that it is whole then; a worker wakes then). A rate a 429 lowered that is back to
    -- full is forgotten.
    UPDATE destinations t
       SET rate_tokens = b.tokens - b.taken,
           rate_updated_at = %(now)s,
           rate_next_at = CASE WHEN b.tokens - b.taken < 1
               THEN %(now)s + make_interval(
                   secs => (1 - (b.tokens - b.taken)) / b.rate + 0.001) END,
           rate_lowered = CASE WHEN b.rate < b.full_rate THEN t.rate_lowered END,
           rate_lowered_at = CASE WHEN b.rate < b.full_rate THEN t.rate_lowered_at END
      FROM (SELECT r.destination_id, r.full_rate, r.rate, r.tokens,
                   (SELECT count(*) FROM claimed c
                     WHERE c.destination_id = r.destination_id) AS taken
              FROM rooms r WHERE r.tokens IS NOT NULL) b
     WHERE t.id = b.destination_id AND b.taken > 0
),
interrupted AS (
    -- The attempt a crash or a lost lease cut short: spent, with no answer.
    INSERT INTO delivery_attempts (organization_id, delivery_id, attempt, claim_token,
                                   started_at, duration_ms, outcome, error_class)
    SELECT c.organization_id, c.id, greatest(c.attempts - 1, 1), c.lost_token,
           c.lost_until - %(lease)s, 0, 'failed', 'interrupted'
      FROM claimed c
     WHERE c.lost_token IS NOT NULL
),
moved AS (
    -- The next claim starts after the last organization this one visited; a claim running
    -- at the same moment leaves the cursor to this one rather than wait for it.
    UPDATE outbox_claim_cursor
       SET visited_org = (SELECT organization_id FROM org_list ORDER BY visit DESC LIMIT 1)
     WHERE id IN (SELECT id FROM outbox_claim_cursor FOR UPDATE SKIP LOCKED)
       AND EXISTS (SELECT 1 FROM org_list)
)
SELECT c.id, c.organization_id, c.kind, c.submission_id, c.destination_id, c.channel,
       c.attempts - 1 AS attempts, c.max_attempts, c.claim_token, c.payload, c.target,
       c.template, c.secret_version, ds.secret, s.form_id,
       -- A submission's deliveries keep no payload: the body is built from its row.
       s."values", s.field_order, s.meta, s.form_snapshot, s.received_at,
       'test' = ANY (s.flags) AS test,
       CASE WHEN c.payload IS NULL AND s.id IS NOT NULL THEN
           coalesce((SELECT jsonb_agg(jsonb_build_object(
                                'id', a.id, 'field', a.field, 'name', a.name,
                                'content_type', a.content_type, 'size', a.size) ORDER BY a.id)
                       FROM attachments a WHERE a.submission_id = s.id), '[]'::jsonb)
       END AS attachments,
       s.erased_at, s.erase_at, dst.deleted_at AS destination_deleted_at,
       dst.enabled AS destination_enabled, dst.paused_reason AS destination_paused_reason,
       dst.health AS destination_health,
       dst.probe_after AS destination_probe_after,
       dst.consecutive_failures AS destination_failures,
       dst.send_limit AS destination_send_limit,
       (s.id IS NOT NULL AND 'over_quota' = ANY (s.flags)
        AND coalesce((SELECT sum(u.submissions) FROM usage_counters u
                        WHERE u.organization_id = c.organization_id
                          AND u.month = %(month)s), 0)
            > (%(limits)s::jsonb ->> o.plan)::integer)
           IS TRUE AS over_quota,
       -- A stream event's delivery: the event its body is built from now (0024).
       c.event_id, ev.stream_id AS event_stream_id, ev.client_id AS event_client_id,
       ev.type AS event_type, ev.occurred_at AS event_occurred_at,
       ev.received_at AS event_received_at, ev.data AS event_data,
       ev.erased_at AS event_erased_at, ev.erase_at AS event_erase_at
  FROM claimed c
  JOIN organizations o ON o.id = c.organization_id
  LEFT JOIN submissions s ON s.id = c.submission_id
  LEFT JOIN stream_events ev ON ev.id = c.event_id
  LEFT JOIN destinations dst ON dst.id = c.destination_id
  LEFT JOIN destination_secrets ds
         ON ds.destination_id = c.destination_id AND ds.version = c.secret_version

-- name: finish_deliveries
-- Write claims' outcomes, each fenced by its token, with their attempts and events, in one
-- statement (%(outcomes)s: a JSON array, one object per outcome; %(ids)s: their ids). An
-- outcome whose claim has expired and been taken again writes nothing but its attempt (as
-- `fenced`). A `sent` outcome written resolves the open `delivery.dead` alert of its subject
-- (the destination, or the form for acknowledgement emails) with an `alert.resolved` event.
-- Returns the (id, claim_token) of the outcomes written.
WITH o AS MATERIALIZED (
    SELECT * FROM jsonb_to_recordset(%(outcomes)s::jsonb) AS o (
        id text, organization_id text, claim_token uuid, status text, spent integer,
        next_attempt_at timestamptz, reason text, detail text, now timestamptz,
        attempt integer, started_at timestamptz, duration_ms integer, http_status integer,
        error_class text, excerpt text, event text, event_data jsonb, subject_id text)
),
locked AS MATERIALIZED (
    -- Rows locked in id order, so two workers' overlapping groups cannot deadlock; found
    -- by primary key, whatever the size of the table.
    SELECT d.id FROM deliveries d
     WHERE d.id = ANY (%(ids)s::text[])
     ORDER BY d.id
       FOR NO KEY UPDATE OF d
),
done AS (
    -- The claim spent an attempt; an outcome without a send (`spent` 0) gives it back.
    UPDATE deliveries d
       SET status = o.status, attempts = greatest(d.attempts - 1 + o.spent, 0),
           next_attempt_at = coalesce(o.next_attempt_at, d.next_attempt_at),
           reason = o.reason, last_detail = o.detail,
           sent_at = CASE WHEN o.status = 'sent' THEN o.now ELSE d.sent_at END,
           claim_token = NULL, claimed_until = NULL, throttled = false, updated_at = o.now
      FROM o
     WHERE d.id = o.id AND d.claim_token = o.claim_token AND d.status = 'sending'
       AND d.id IN (SELECT id FROM locked)
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
),
recovering AS MATERIALIZED (
    -- The open alerts a written `sent` outcome recovers, locked in id order (the first
    -- such delivery of the group resolves each).
    SELECT a.id, s.delivery_id, s.now
      FROM (SELECT DISTINCT ON (o.organization_id, o.subject_id)
                   o.organization_id, o.subject_id, o.id AS delivery_id, o.now
              FROM o JOIN done ON done.id = o.id AND done.claim_token = o.claim_token
             WHERE o.status = 'sent' AND o.subject_id IS NOT NULL
             ORDER BY o.organization_id, o.subject_id, o.id) s
      JOIN alerts a
        ON a.organization_id = s.organization_id AND a.subject_id = s.subject_id
       AND a.kind = 'delivery.dead' AND a.status = 'open'
     ORDER BY a.id
       FOR UPDATE OF a
),
resolved AS (
    UPDATE alerts a
       SET status = 'resolved', resolved_at = r.now, resolved_by_delivery_id = r.delivery_id
      FROM recovering r
     WHERE a.id = r.id AND a.status = 'open'
    RETURNING a.id, a.organization_id, a.subject_id, a.occurrences, a.last_delivery_id,
              r.delivery_id, r.now
),
resolved_event AS (
    INSERT INTO events (organization_id, type, subject_id, data, created_at)
    SELECT organization_id, 'alert.resolved', id,
           jsonb_build_object('kind', 'delivery.dead', 'subject', subject_id,
                              'occurrences', occurrences, 'last_dead_delivery',
                              last_delivery_id, 'delivery', delivery_id),
           now
      FROM resolved
)
SELECT id, claim_token FROM done

-- name: release_claim
-- Give a claimed row back with the claim's attempt unspent: held for quota, or pushed back
-- behind a failing destination's probe (fenced like an outcome).
UPDATE deliveries
   SET status = CASE WHEN attempts > 1 THEN 'failed' ELSE 'pending' END,
       attempts = greatest(attempts - 1, 0),
       held = %(held)s, throttled = %(throttled)s,
       next_attempt_at = greatest(next_attempt_at, %(next_attempt_at)s),
       last_detail = %(detail)s, claim_token = NULL, claimed_until = NULL, updated_at = %(now)s
 WHERE id = %(id)s AND claim_token = %(claim_token)s AND status = 'sending'
RETURNING id

-- name: give_back_claims
-- Give claims back at once, due again as they were, with the claim's attempt unspent (a pass ending with
-- sends in flight, a worker shutting down); each fenced by its token, locked in id order.
-- %(claims)s: a JSON array of {id, claim_token}; %(ids)s: their ids.
WITH g AS MATERIALIZED (
    SELECT * FROM jsonb_to_recordset(%(claims)s::jsonb) AS g (id text, claim_token uuid)
),
locked AS MATERIALIZED (
    SELECT d.id FROM deliveries d
     WHERE d.id = ANY (%(ids)s::text[])
     ORDER BY d.id
       FOR NO KEY UPDATE OF d
)
UPDATE deliveries d
   SET status = CASE WHEN d.attempts > 1 THEN 'failed' ELSE 'pending' END,
       attempts = greatest(d.attempts - 1, 0),
       last_detail = %(detail)s, claim_token = NULL, claimed_until = NULL, updated_at = %(now)s
  FROM g
 WHERE d.id = g.id AND d.claim_token = g.claim_token AND d.status = 'sending'
   AND d.id IN (SELECT id FROM locked)
RETURNING d.id

-- name: release_held
-- Un-hold the deliveries of organizations no longer over their monthly quota (an upgrade,
-- or a new month).
UPDATE deliveries d
   SET held = false, updated_at = %(now)s
  FROM organizations o
 WHERE d.held AND o.id = d.organization_id
   AND o.id IN (SELECT DISTINCT organization_id FROM deliveries WHERE held)
   AND (coalesce((SELECT sum(u.submissions) FROM usage_counters u
                   WHERE u.organization_id = o.id AND u.month = %(month)s), 0)
        > (%(limits)s::jsonb ->> o.plan)::integer) IS NOT TRUE
RETURNING d.id

-- name: destination_failed
-- Count a failed send against a healthy destination, or a failed probe of a failing one
-- (failures of sends already in flight when it turned failing are not counted again). At
-- the threshold it is `failing` (and `open_probe_window` opens its next window). Returns
-- nothing for an uncounted failure.
UPDATE destinations
   SET consecutive_failures = consecutive_failures + 1,
       health = CASE WHEN consecutive_failures + 1 >= %(threshold)s THEN 'failing'
                     ELSE health END
 WHERE id = %(id)s AND (health = 'healthy' OR %(probe)s)
RETURNING health, probe_after, consecutive_failures

-- name: promote_parked
-- Make one parked delivery the next probe of a failing destination, due when the window ends.
UPDATE deliveries
   SET next_attempt_at = %(at)s, updated_at = %(now)s
 WHERE id = (SELECT id FROM deliveries
              WHERE destination_id = %(id)s AND throttled AND status IN ('pending', 'failed')
              ORDER BY next_attempt_at, id LIMIT 1)

-- name: park_due
-- Park every due delivery of a failing (or paused) destination at once (not one claim at a
-- time): due again at %(until)s at the latest, released by the next successful probe (or
-- the resume). Rows another
-- statement holds are passed over (they are parked as they are claimed).
WITH parked AS (
    SELECT id FROM deliveries
     WHERE destination_id = %(id)s AND status IN ('pending', 'failed') AND NOT held
       AND NOT throttled AND next_attempt_at <= %(now)s
     ORDER BY id
       FOR NO KEY UPDATE SKIP LOCKED
)
UPDATE deliveries d
   SET throttled = true, next_attempt_at = greatest(d.next_attempt_at, %(until)s),
       last_detail = %(detail)s, updated_at = %(now)s
  FROM parked
 WHERE d.id = parked.id

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

-- name: open_probe_window
-- Open a failing destination's probe window (the one place of its length): 30 s at the
-- threshold of failures in a row, doubling with each failure past it, at most 6 h. Without
-- `reopen` only once the current window has ended, so exactly one delivery probes per
-- window; with it (a failure was just counted) at once. Returns the window's end.
UPDATE destinations
   SET probe_after = %(now)s + make_interval(secs =>
           least(power(2, greatest(consecutive_failures - %(threshold)s, 0)) * %(base)s,
                 %(cap)s))
 WHERE id = %(id)s AND health = 'failing'
   AND (%(reopen)s OR probe_after IS NULL OR probe_after <= %(now)s)
RETURNING probe_after

-- name: destination_probe_after
-- When a failing destination's current probe window ends.
SELECT health, probe_after FROM destinations WHERE id = %(id)s

-- name: adapt_send_limit
-- Move a destination's limit of sends in flight toward `target` (the limit its latency
-- allows): down at once, up one step per answer; null again at the worker's default.
UPDATE destinations
   SET send_limit = CASE
           WHEN coalesce(send_limit, %(ceiling)s) > %(target)s THEN %(target)s
           WHEN send_limit + 1 >= %(ceiling)s THEN NULL
           ELSE send_limit + 1 END
 WHERE id = %(id)s AND coalesce(send_limit, %(ceiling)s) <> %(target)s
RETURNING send_limit

-- name: lower_rate
-- A 429 from a destination with a rate (its own or its type's): halve the rate it sends at
-- now (at least %(floor)s a second), and empty its bucket so that the next send waits the
-- longer of the `Retry-After` (%(retry_after)s, seconds or null) and one token at the new
-- rate. A 429 to a send that began before the last lowering (sent at the old rate) lowers
-- nothing more. Returns the new rate.
WITH lowering AS MATERIALIZED (
    SELECT t.id,
           greatest(least(%(floor)s, f.full_rate),
                    postbag_send_rate(f.full_rate, t.rate_lowered, t.rate_lowered_at, %(now)s,
                                      %(recover)s) / 2) AS rate
      FROM destinations t
     CROSS JOIN LATERAL (
        SELECT postbag_rate_of(t.rate_per_second, t.type, %(type_rates)s) AS full_rate) f
     WHERE t.id = %(id)s AND f.full_rate IS NOT NULL
       AND (t.rate_lowered_at IS NULL OR t.rate_lowered_at < %(started_at)s)
       FOR NO KEY UPDATE OF t
)
UPDATE destinations t
   SET rate_lowered = c.rate, rate_lowered_at = %(now)s,
       rate_tokens = least(0, 1 - c.rate * coalesce(%(retry_after)s::double precision, 0)),
       rate_updated_at = %(now)s,
       rate_next_at = %(now)s + make_interval(
           secs => greatest(1 / c.rate, coalesce(%(retry_after)s::double precision, 0)) + 0.001)
  FROM lowering c
 WHERE t.id = c.id
RETURNING c.rate

-- name: next_rate_token
-- The soonest time a destination whose bucket is empty gets its next token, after %(since)s,
-- of those with deliveries due by %(now)s that its rate held back (a worker's next claim
-- while they wait); an empty bucket with nothing due keeps no pass waiting.
SELECT min(t.rate_next_at) AS at FROM destinations t
 WHERE t.rate_next_at > %(since)s
   AND EXISTS (SELECT FROM deliveries d
                WHERE d.organization_id = t.organization_id AND d.destination_id = t.id
                  AND d.status IN ('pending', 'failed') AND NOT d.held
                  AND d.next_attempt_at <= %(now)s)
