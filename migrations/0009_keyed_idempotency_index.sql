-- Idempotency keys are unique per form through a partial index over keyed rows only.
-- The full (form_id, idempotency_key) constraint also held every key-less submission, and
-- the key-less double-submit lookup (`idempotency_key IS NULL`, same client and payload
-- within 60 s) could be planned on it, walking every key-less submission of the form on
-- each submit. Now key-less rows skip this index (one index fewer to write per submit) and
-- that lookup goes through submissions_client_recent_idx.
ALTER TABLE submissions DROP CONSTRAINT submissions_form_idempotency_key;

CREATE UNIQUE INDEX submissions_form_idempotency_key ON submissions (form_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
