-- The visitor's field order (jsonb keeps no key order: it stores keys shortest first).
--
-- A submission keeps the names of its values in the order they were posted, beside the
-- values; rows stored before this have none and are shown in the documented fallback order
-- (the form's labels in their order, then the other names alphabetically). A form's labels
-- become `json`, which keeps the order the owner declared them in; no statement needs
-- jsonb operators on them.
ALTER TABLE submissions ADD COLUMN field_order text[];

ALTER TABLE forms ALTER COLUMN labels DROP DEFAULT;
ALTER TABLE forms ALTER COLUMN labels TYPE json USING labels::json;
ALTER TABLE forms ALTER COLUMN labels SET DEFAULT '{}';

-- Release from quarantine and marking as spam by the owner. A released submission is
-- `accepted` with `released_at` set (released once: a second release is refused); an owner's
-- spam mark is `spam` with reason `marked_spam`. The status and reason a submission had
-- before stay in its events (`submission.released`, `submission.marked_spam`), which the
-- receipt reads by subject (events_subject_idx, from 0012).
ALTER TABLE submissions ADD COLUMN released_at timestamptz;
ALTER TABLE submissions DROP CONSTRAINT submissions_reason_matches_status;
ALTER TABLE submissions ADD CONSTRAINT submissions_reason_matches_status CHECK (
    (status = 'accepted' AND reason IS NULL)
    OR (status = 'spam' AND reason IS NOT NULL AND reason IN ('honeypot', 'marked_spam'))
    OR (status = 'quarantined' AND reason IS NOT NULL AND reason IN ('origin_rejected',
        'rate_limited', 'turnstile_failed', 'turnstile_unavailable', 'schema_violation'))
);

-- An open alert resolves itself when a later delivery to its subject (the destination, or
-- the form for acknowledgement emails) is sent: status `resolved`, with the time and the
-- delivery that recovered it, and an `alert.resolved` event.
ALTER TABLE alerts ADD COLUMN resolved_at timestamptz;
ALTER TABLE alerts ADD COLUMN resolved_by_delivery_id text;
ALTER TABLE alerts DROP CONSTRAINT alerts_status_check;
ALTER TABLE alerts ADD CONSTRAINT alerts_status_check
    CHECK (status IN ('open', 'acknowledged', 'resolved'));
ALTER TABLE alerts ADD CONSTRAINT alerts_resolved_has_time CHECK (
    (status = 'resolved') = (resolved_at IS NOT NULL)
);
