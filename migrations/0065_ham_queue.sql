-- Implicit ham's due times in a queue of their own, out of the submissions table.
--
-- 0044 kept the due time in `submissions.ham_due_at` under a partial index. Clearing it once
-- the pass had taught or dropped a submission changed an indexed column, so the update could
-- never be HOT: every accepted submission was written again 72 hours after it arrived, with
-- a new entry in each of its table's indexes (the trigram index of its values included), and
-- a submission still on its way to a destination again every hour. A row of `ham_due` is
-- inserted with the submission, in its statement, and deleted by the pass: the submission
-- is not written again.
CREATE TABLE ham_due (
    submission_id   text NOT NULL,
    organization_id text NOT NULL,
    due_at          timestamptz NOT NULL,
    PRIMARY KEY (submission_id, organization_id),
    FOREIGN KEY (submission_id, organization_id)
        REFERENCES submissions (id, organization_id) ON DELETE CASCADE
);
CREATE INDEX ham_due_at_idx ON ham_due (due_at);

ALTER TABLE ham_due ENABLE ROW LEVEL SECURITY;
CREATE POLICY ham_due_organization_scope ON ham_due
    USING (organization_id = current_setting('postbag.organization_id', true))
    WITH CHECK (organization_id = current_setting('postbag.organization_id', true));
GRANT SELECT, INSERT, UPDATE, DELETE ON ham_due TO postbag_app;

INSERT INTO ham_due (submission_id, organization_id, due_at)
SELECT id, organization_id, ham_due_at FROM submissions WHERE ham_due_at IS NOT NULL;

DROP INDEX submissions_ham_due_idx;
ALTER TABLE submissions DROP COLUMN ham_due_at;
