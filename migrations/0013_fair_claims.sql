-- Claims fair across organizations and destinations (docs/delivery.md): a claim walks the
-- due rows by organization, then by destination within it, so the index leads with both,
-- and counts each destination's sends in flight (its own small partial index);
-- each destination has an adaptive limit of sends in flight (null: the worker's default);
-- and one row remembers the last organization the previous claim visited, so the next one
-- starts after it (every organization gets its turn, however many are due).

ALTER TABLE destinations ADD COLUMN send_limit smallint CHECK (send_limit >= 1);

DROP INDEX deliveries_org_due_idx;
CREATE INDEX deliveries_org_due_idx ON deliveries (organization_id, destination_id, next_attempt_at)
    WHERE status IN ('pending', 'failed') AND NOT held;

CREATE INDEX deliveries_in_flight_idx ON deliveries (destination_id, claimed_until)
    WHERE status = 'sending';

CREATE TABLE outbox_claim_cursor (
    id          boolean PRIMARY KEY DEFAULT true CHECK (id),
    visited_org text
);
INSERT INTO outbox_claim_cursor DEFAULT VALUES;
