-- Bounded storage: attachment bytes counted per organization and month, events pruned by
-- age, and spam and quarantined submissions kept 30 days at most on every plan.

ALTER TABLE usage_counters
    ADD COLUMN attachment_bytes bigint NOT NULL DEFAULT 0 CHECK (attachment_bytes >= 0);

-- The retention tick prunes events older than the history period (docs/operations.md).
CREATE INDEX events_created_idx ON events (created_at);

-- Spam and quarantined submissions that arrived before this migration get the spam
-- retention too (30 days from arrival, or sooner if their own was shorter).
UPDATE submissions
   SET erase_at = received_at + interval '30 days'
 WHERE status IN ('spam', 'quarantined') AND erased_at IS NULL
   AND (erase_at IS NULL OR erase_at > received_at + interval '30 days');

-- Erasing a submission scrubs the `delivery.*` events of its deliveries.
CREATE INDEX events_subject_idx ON events (subject_id);

-- `schema.drift` events record each error's path and validator keyword, never the value:
-- the messages written before this migration (which quote values) are dropped.
UPDATE events
   SET data = jsonb_set(data, '{errors}', (
           SELECT coalesce(jsonb_agg(jsonb_build_object('path', item -> 'path')), '[]'::jsonb)
             FROM jsonb_array_elements(data -> 'errors') AS x(item)))
 WHERE type = 'schema.drift' AND jsonb_typeof(data -> 'errors') = 'array';
