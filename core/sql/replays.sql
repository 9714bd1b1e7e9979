-- name: replay_filter_owned
-- Whether the destination, form and stream a replay's filter names (when it names them) are live
-- objects of the organization.
SELECT (%(destination_id)s::text IS NULL
        OR EXISTS (SELECT 1 FROM destinations
                    WHERE id = %(destination_id)s::text
                      AND organization_id = %(organization_id)s AND deleted_at IS NULL))
       AND (%(form_id)s::text IS NULL
        OR EXISTS (SELECT 1 FROM forms
                    WHERE id = %(form_id)s::text
                      AND organization_id = %(organization_id)s AND deleted_at IS NULL))
       AND (%(stream_id)s::text IS NULL
        OR EXISTS (SELECT 1 FROM streams
                    WHERE id = %(stream_id)s::text AND organization_id = %(organization_id)s))
       AS owned

-- name: replay_matches
-- The deliveries a replay's filter matches, oldest first, at most %(limit)s of them, each
-- locked until the transaction ends (so an erase waits, and then skips what was queued),
-- with how many match in all. Never a delivery whose values are erased or expired, whose
-- submission is now spam, whose destination is removed or paused, or that was skipped for
-- one of those reasons. `failed` also matches a delivery parked before its first attempt.
WITH candidates AS (
    SELECT d.id, d.created_at
      FROM deliveries d
      LEFT JOIN submissions s
        ON s.id = d.submission_id AND s.organization_id = d.organization_id
      LEFT JOIN stream_events ev
        ON ev.id = d.event_id AND ev.organization_id = d.organization_id
      LEFT JOIN destinations dst
        ON dst.id = d.destination_id AND dst.organization_id = d.organization_id
     WHERE d.organization_id = %(organization_id)s
       AND (d.status = ANY(%(statuses)s::text[])
            -- `failed` is waiting for a retry, as one parked behind a probe or a pause is.
            OR ('failed' = ANY(%(statuses)s::text[]) AND d.status = 'pending' AND d.throttled))
       AND d.created_at >= %(since)s AND d.created_at < %(until)s
       AND (%(destination_id)s::text IS NULL OR d.destination_id = %(destination_id)s::text)
       AND (%(form_id)s::text IS NULL OR s.form_id = %(form_id)s::text)
       AND (%(stream_id)s::text IS NULL OR ev.stream_id = %(stream_id)s::text)
       AND (d.submission_id IS NULL
            OR (s.erased_at IS NULL AND (s.erase_at IS NULL OR s.erase_at > %(now)s)
                AND s.status <> 'spam'))
       AND (d.event_id IS NULL
            OR (ev.erased_at IS NULL AND (ev.erase_at IS NULL OR ev.erase_at > %(now)s)))
       AND (d.destination_id IS NULL OR (dst.deleted_at IS NULL AND dst.enabled))
       AND (d.status <> 'skipped'
            OR d.reason NOT IN ('values_erased', 'values_expired', 'destination_removed',
                                'submission_spam'))
       FOR UPDATE OF d
)
SELECT id, count(*) OVER ()::int AS total
  FROM candidates
 ORDER BY created_at, id
 LIMIT %(limit)s

-- name: insert_replay
INSERT INTO replays (id, organization_id, filter, total, per_second, created_at)
VALUES (%(id)s, %(organization_id)s, %(filter)s, %(total)s, %(per_second)s, %(now)s)

-- name: queue_replay_deliveries
-- Queue the matched deliveries again (the same ids, attempts reset, as retry by hand does;
-- each attempt is aimed at the destination as it is then), due one after another at
-- `per_second`.
UPDATE deliveries d
   SET status = 'pending', attempts = 0, reason = NULL, held = false, throttled = false,
       claim_token = NULL, claimed_until = NULL, replay_id = %(replay_id)s,
       next_attempt_at = %(now)s + (m.n - 1) * (interval '1 second' / %(per_second)s),
       last_detail = 'queued by replay', updated_at = %(now)s
  FROM unnest(%(ids)s::text[]) WITH ORDINALITY AS m (id, n)
 WHERE d.id = m.id AND d.organization_id = %(organization_id)s

-- name: probe_replayed_destinations
-- A replay is the owner saying the receiver is back: each failing destination it queued
-- deliveries to has its probe window end now, so its first replayed delivery probes at
-- once (the storm breaker's window would hold them all back, up to 6 h); that probe's
-- success restores it and the replay's own rate paces the rest.
UPDATE destinations
   SET probe_after = %(now)s
 WHERE organization_id = %(organization_id)s AND health = 'failing' AND probe_after > %(now)s
   AND id IN (SELECT destination_id FROM deliveries
               WHERE id = ANY(%(ids)s::text[]) AND organization_id = %(organization_id)s)

-- name: get_replay
-- A replay and its progress: where each delivery it queued stands now (a delivery queued
-- again by a later replay counts there).
SELECT r.id, r.filter, r.total, r.per_second, r.created_at,
       count(d.id) FILTER (WHERE d.status IN ('pending', 'sending', 'failed'))::int AS queued,
       count(d.id) FILTER (WHERE d.status = 'sent')::int AS sent,
       count(d.id) FILTER (WHERE d.status = 'dead')::int AS failed,
       count(d.id) FILTER (WHERE d.status = 'skipped')::int AS skipped
  FROM replays r
  LEFT JOIN deliveries d ON d.replay_id = r.id AND d.organization_id = r.organization_id
 WHERE r.id = %(id)s AND r.organization_id = %(organization_id)s
 GROUP BY r.id, r.organization_id
