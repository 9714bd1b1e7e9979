-- Spam defence that learns from decisions only (docs/spam.md): implicit ham, a rule that
-- could not finish, and the learned score written with the row.

-- When an accepted submission teaches the learned filter "not spam" unless its owner marked
-- it first (implicit ham: received_at + the form's grace period, set by the submit path for
-- an accepted post of a form with implicit ham on). The retention tick's `ham` pass takes
-- the due ones, teaches or drops each once, and clears it.
ALTER TABLE submissions ADD COLUMN ham_due_at timestamptz;
CREATE INDEX submissions_ham_due_idx ON submissions (ham_due_at) WHERE ham_due_at IS NOT NULL;

-- `spam_unchecked`: a content rule could not finish within its budget (quarantined).
ALTER TABLE submissions DROP CONSTRAINT submissions_reason_matches_status;
ALTER TABLE submissions ADD CONSTRAINT submissions_reason_matches_status CHECK (
    (status = 'accepted' AND reason IS NULL)
    OR (status = 'spam' AND reason IS NOT NULL AND reason IN ('honeypot', 'marked_spam',
        'spam_rule:links', 'spam_rule:words', 'spam_rule:patterns', 'spam_rule:email_domain',
        'spam_rule:disposable_email', 'spam_rule:script', 'too_fast', 'stale_token',
        'forged_token', 'missing_token', 'duplicate_content', 'learned', 'akismet'))
    OR (status = 'quarantined' AND reason IS NOT NULL AND reason IN ('origin_rejected',
        'rate_limited', 'turnstile_failed', 'turnstile_unavailable', 'schema_violation',
        'schema_unchecked', 'schema_error', 'hcaptcha_failed', 'hcaptcha_unavailable',
        'recaptcha_failed', 'recaptcha_unavailable', 'akismet_unavailable', 'spam_unchecked'))
);
