-- The outbox worker's additions: storm throttling marks the deliveries it pushed back, so
-- a destination's recovery releases exactly those (and not rows waiting out their own
-- backoff); and an index that lets a claim visit each organization with due rows once.

ALTER TABLE deliveries ADD COLUMN throttled boolean NOT NULL DEFAULT false;

CREATE INDEX deliveries_org_due_idx ON deliveries (organization_id, next_attempt_at)
    WHERE status IN ('pending', 'failed') AND NOT held;

CREATE INDEX deliveries_throttled_idx ON deliveries (destination_id) WHERE throttled;
