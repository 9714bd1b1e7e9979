-- Idempotency keys in a table of their own: one per form, whatever week of submissions holds
-- the submission (0067 partitions submissions by week, where a unique key can only hold
-- within a week). The submit statement writes a keyed submission's key here in the same
-- statement, and reads a repeat's submission through it. Existing keys are copied; 0067 adds
-- the foreign key that removes a key with its submission (this one leaves the submissions'
-- keys as they are, so it also applies to a layout before 0062).

CREATE TABLE submission_keys (
    form_id         text NOT NULL,
    idempotency_key text NOT NULL,
    organization_id text NOT NULL,
    submission_id   text NOT NULL,
    CONSTRAINT submission_keys_pkey PRIMARY KEY (form_id, idempotency_key, organization_id)
);
COMMENT ON TABLE submission_keys IS
    'A keyed submission''s idempotency key: unique per form across the weeks of submissions.';
INSERT INTO submission_keys (form_id, idempotency_key, organization_id, submission_id)
SELECT form_id, idempotency_key, organization_id, id FROM submissions
 WHERE idempotency_key IS NOT NULL;
CREATE INDEX submission_keys_submission_idx ON submission_keys (submission_id);

ALTER TABLE submission_keys ENABLE ROW LEVEL SECURITY;
CREATE POLICY submission_keys_organization_scope ON submission_keys
    USING (organization_id = current_setting('postbag.organization_id', true))
    WITH CHECK (organization_id = current_setting('postbag.organization_id', true));
GRANT SELECT, INSERT, UPDATE, DELETE ON submission_keys TO postbag_app;
