-- Spam defence (docs/spam.md): content rules, the fill-time token, duplicates and a filter
-- that learns from each organization's own decisions. Every verdict stores the submission
-- as `spam` with the reason naming what caught it; nothing is dropped.

-- A form's spam settings (`core.spam.settings.SpamSettings`; `{}` = the defaults), and the
-- write-only secrets of its external checks (hCaptcha, reCAPTCHA, Akismet).
ALTER TABLE forms ADD COLUMN spam jsonb NOT NULL DEFAULT '{}';
ALTER TABLE forms ADD COLUMN spam_secrets jsonb NOT NULL DEFAULT '{}';

-- The learned filter's score of a submission it judged (0–1, the probability of spam).
ALTER TABLE submissions ADD COLUMN spam_score real CHECK (spam_score BETWEEN 0 AND 1);

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
        'recaptcha_failed', 'recaptcha_unavailable', 'akismet_unavailable'))
);
-- The spam counts per reason over 30 days (`GET /v1/forms/{id}/spam`).
CREATE INDEX submissions_form_spam_idx ON submissions (form_id, received_at)
    WHERE status <> 'accepted';

-- Duplicates: per form, a keyed hash of the normalised values, how many times it was posted
-- in the current window and when that window started. Pruned once the window is over.
CREATE TABLE spam_fingerprints (
    form_id         text NOT NULL,
    organization_id text NOT NULL,
    fingerprint     bytea NOT NULL CHECK (length(fingerprint) = 16),
    window_start    timestamptz NOT NULL,
    count           integer NOT NULL CHECK (count >= 1),
    CONSTRAINT spam_fingerprints_key PRIMARY KEY (form_id, fingerprint),
    FOREIGN KEY (form_id, organization_id) REFERENCES forms (id, organization_id) ON DELETE CASCADE
);
CREATE INDEX spam_fingerprints_window_idx ON spam_fingerprints (window_start);

-- The learned filter: per organization, how many submissions it was trained on as spam and
-- as not spam, and per token (a keyed hash of `field:word`, never the word) in how many of
-- each it appeared.
CREATE TABLE spam_models (
    organization_id text PRIMARY KEY REFERENCES organizations (id) ON DELETE CASCADE,
    spam_docs       integer NOT NULL DEFAULT 0 CHECK (spam_docs >= 0),
    ham_docs        integer NOT NULL DEFAULT 0 CHECK (ham_docs >= 0),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE spam_tokens (
    organization_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    token           bytea NOT NULL CHECK (length(token) = 8),
    spam            integer NOT NULL DEFAULT 0 CHECK (spam >= 0),
    ham             integer NOT NULL DEFAULT 0 CHECK (ham >= 0),
    CONSTRAINT spam_tokens_key PRIMARY KEY (organization_id, token)
);
-- What each trained submission added (its label and token hashes), so a new decision moves
-- it to the other side and an erase takes it out again.
CREATE TABLE spam_training (
    submission_id   text PRIMARY KEY,
    organization_id text NOT NULL,
    label           text NOT NULL CHECK (label IN ('spam', 'ham')),
    tokens          bytea[] NOT NULL,
    trained_at      timestamptz NOT NULL,
    FOREIGN KEY (submission_id, organization_id)
        REFERENCES submissions (id, organization_id) ON DELETE CASCADE
);
CREATE INDEX spam_training_organization_idx ON spam_training (organization_id);

ALTER TABLE spam_fingerprints ENABLE ROW LEVEL SECURITY;
CREATE POLICY spam_fingerprints_organization_scope ON spam_fingerprints
    USING (organization_id = current_setting('postbag.organization_id', true))
    WITH CHECK (organization_id = current_setting('postbag.organization_id', true));
ALTER TABLE spam_models ENABLE ROW LEVEL SECURITY;
CREATE POLICY spam_models_organization_scope ON spam_models
    USING (organization_id = current_setting('postbag.organization_id', true))
    WITH CHECK (organization_id = current_setting('postbag.organization_id', true));
ALTER TABLE spam_tokens ENABLE ROW LEVEL SECURITY;
CREATE POLICY spam_tokens_organization_scope ON spam_tokens
    USING (organization_id = current_setting('postbag.organization_id', true))
    WITH CHECK (organization_id = current_setting('postbag.organization_id', true));
ALTER TABLE spam_training ENABLE ROW LEVEL SECURITY;
CREATE POLICY spam_training_organization_scope ON spam_training
    USING (organization_id = current_setting('postbag.organization_id', true))
    WITH CHECK (organization_id = current_setting('postbag.organization_id', true));
GRANT SELECT, INSERT, UPDATE, DELETE
    ON spam_fingerprints, spam_models, spam_tokens, spam_training TO postbag_app;
