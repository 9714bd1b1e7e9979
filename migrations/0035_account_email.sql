-- An email about a member's account (a password reset) is an outbox delivery of its own
-- kind, in the member's first organization: durable, retried and visible like a notice
-- email (kind `notification`, 0028), its subject and text in the payload. The payload holds
-- no token: the link is sealed from a nonce and the installation's secret key when it is
-- sent (docs/teams.md#signing-in).
ALTER TABLE deliveries DROP CONSTRAINT deliveries_kind_check;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_kind_check
    CHECK (kind IN ('submission', 'acknowledgement', 'digest', 'event', 'notification',
                    'account'));
ALTER TABLE deliveries DROP CONSTRAINT deliveries_kind_references;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_kind_references CHECK (
    (kind = 'submission' AND submission_id IS NOT NULL AND route_id IS NOT NULL
        AND destination_id IS NOT NULL)
    OR (kind = 'acknowledgement' AND submission_id IS NOT NULL AND route_id IS NULL)
    OR (kind = 'digest' AND digest_id IS NOT NULL AND route_id IS NOT NULL
        AND destination_id IS NOT NULL)
    OR (kind = 'event' AND submission_id IS NULL AND route_id IS NULL)
    OR (kind IN ('notification', 'account') AND submission_id IS NULL AND route_id IS NULL
        AND destination_id IS NULL AND payload IS NOT NULL)
);

-- How many password resets were asked for an address in its current window, whoever asked
-- from wherever, member or not: the bound per recipient, counted and checked by the one
-- statement that queues the email (`queue_password_reset`), which writes it for any
-- address so that a member's request and a stranger's do the same work. The address is kept
-- only as an HMAC keyed with POSTBAG_SECRET_KEY; the retention tick deletes the rows whose
-- window has ended. Not a tenant table: only the owner's role reads it.
CREATE TABLE reset_counts (
    recipient_hash  bytea PRIMARY KEY,
    window_start    timestamptz NOT NULL,
    sent            integer NOT NULL CHECK (sent >= 1)
);
CREATE INDEX reset_counts_window_idx ON reset_counts (window_start);
