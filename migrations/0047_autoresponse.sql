-- Autoresponses (docs/autoresponse.md): a form's confirmation email to the visitor, an
-- outbox delivery of its own kind planned by the submit statement.
ALTER TABLE forms ADD COLUMN autoresponse jsonb;

ALTER TABLE deliveries DROP CONSTRAINT deliveries_kind_check;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_kind_check
    CHECK (kind IN ('submission', 'acknowledgement', 'digest', 'event', 'notification',
                    'account', 'autoresponse'));
ALTER TABLE deliveries DROP CONSTRAINT deliveries_kind_references;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_kind_references CHECK (
    (kind = 'submission' AND submission_id IS NOT NULL AND route_id IS NOT NULL
        AND destination_id IS NOT NULL)
    OR (kind IN ('acknowledgement', 'autoresponse') AND submission_id IS NOT NULL
        AND route_id IS NULL)
    OR (kind = 'digest' AND digest_id IS NOT NULL AND route_id IS NOT NULL
        AND destination_id IS NOT NULL)
    OR (kind = 'event' AND submission_id IS NULL AND route_id IS NULL)
    OR (kind IN ('notification', 'account') AND submission_id IS NULL AND route_id IS NULL
        AND destination_id IS NULL AND payload IS NOT NULL)
);
ALTER TABLE deliveries DROP CONSTRAINT deliveries_payload_of_digests_only;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_payload_of_digests_only CHECK (
    CASE kind WHEN 'digest' THEN payload IS NOT NULL
              WHEN 'submission' THEN payload IS NULL
              WHEN 'acknowledgement' THEN payload IS NULL
              WHEN 'autoresponse' THEN payload IS NULL
              ELSE true END
);
-- At most one autoresponse per submission: a repeat of the statement plans none again.
CREATE UNIQUE INDEX deliveries_one_autoresponse_idx ON deliveries (submission_id)
    WHERE kind = 'autoresponse';

-- Autoresponses per recipient mailbox and UTC day: `scope` is the organization's id for its
-- own bound, '' for the installation's. The mailbox is kept only as an HMAC keyed with
-- POSTBAG_SECRET_KEY (the acknowledgement cap's). The submit statement counts with an
-- upsert whose update only happens under the bound: concurrent submits to one address wait
-- on the row and re-check it. Not a tenant table: the owner's role counts for the public path.
CREATE TABLE autoresponse_counts (
    scope          text    NOT NULL,
    recipient_hash bytea   NOT NULL,
    day            date    NOT NULL,
    sent           integer NOT NULL CHECK (sent >= 1),
    PRIMARY KEY (scope, recipient_hash, day)
);
CREATE INDEX autoresponse_counts_day_idx ON autoresponse_counts (day);

-- The installation's suppression list: mailboxes (as the same HMAC) no autoresponse goes to,
-- added by the recipient's unsubscribe or a provider's bounce or complaint.
CREATE TABLE email_suppressions (
    recipient_hash bytea PRIMARY KEY,
    reason         text NOT NULL CHECK (reason IN ('unsubscribed', 'bounced', 'complained')),
    created_at     timestamptz NOT NULL DEFAULT now()
);
GRANT SELECT, INSERT, UPDATE, DELETE ON autoresponse_counts, email_suppressions TO postbag_app;
