-- name: health_snapshot
-- Worker heartbeat age (any worker's, and `replica_worker`'s own) and the age of the oldest
-- due delivery of a destination with no send in flight, all in seconds, how many
-- delivery workers finished a pass within `alive`, and how many stored files ran out of
-- deletion attempts.
SELECT
    (SELECT extract(epoch FROM %(now)s - max(last_beat_at))
       FROM worker_heartbeats WHERE tick = 'deliver') AS heartbeat_age,
    (SELECT extract(epoch FROM %(now)s - last_beat_at)
       FROM worker_heartbeats
      WHERE tick = 'deliver' AND worker_id = %(replica_worker)s) AS replica_heartbeat_age,
    (SELECT count(*) FROM worker_heartbeats
      WHERE tick = 'deliver' AND last_beat_at >= %(now)s - %(alive)s) AS live_workers,
    -- A destination with a send under a live lease is draining at its own pace (a slow
    -- receiver is given fewer sends at once): its backlog says nothing about the workers.
    (SELECT extract(epoch FROM %(now)s - min(d.next_attempt_at))
       FROM deliveries d
      WHERE d.status IN ('pending', 'failed') AND NOT d.held
        AND d.next_attempt_at <= %(now)s
        AND NOT EXISTS (SELECT FROM deliveries s
                         WHERE s.destination_id = d.destination_id AND s.status = 'sending'
                           AND s.claimed_until >= %(now)s)) AS oldest_due_age,
    (SELECT count(*) FROM stored_objects
      WHERE deleted_at IS NULL AND delete_after IS NOT NULL
        AND delete_attempts >= %(max_delete_attempts)s) AS stuck_deletions

-- name: record_heartbeat
-- Record that a worker finished a pass of a tick (started at `now`). A worker's deliver
-- passes overlap and may end out of order: the beat never moves back, and the last pass
-- is the one that started last.
INSERT INTO worker_heartbeats (worker_id, tick, last_beat_at, last_pass)
VALUES (%(worker_id)s, %(tick)s, %(now)s, %(last_pass)s)
ON CONFLICT (worker_id, tick) DO UPDATE
   SET last_beat_at = greatest(worker_heartbeats.last_beat_at, EXCLUDED.last_beat_at),
       last_pass = CASE WHEN EXCLUDED.last_beat_at >= worker_heartbeats.last_beat_at
                        THEN EXCLUDED.last_pass ELSE worker_heartbeats.last_pass END

-- name: replica_lag
-- How many seconds this server's data is behind its primary's: 0 on a primary, and on a
-- standby that has applied all the changes it received (an idle primary sends none, so the
-- time since the last one applied is no lag); else the time since the last change applied.
-- Null where a managed replica does not report when it applied a change.
SELECT CASE
         WHEN NOT pg_is_in_recovery() THEN 0
         WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0
         ELSE greatest(0, extract(epoch FROM now() - pg_last_xact_replay_timestamp()))
       END AS seconds
