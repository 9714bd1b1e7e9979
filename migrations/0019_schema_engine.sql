-- Schemas that keep their word.
--
-- Inference only suggests: an inferred version is `suggested` and never the schema a form
-- enforces (the current schema is the latest `manual` one; a suggestion becomes current
-- only when the owner adopts it, which appends a `manual` copy). Versions are immutable;
-- this rename is the one exception, made here.
ALTER TABLE form_schemas DROP CONSTRAINT form_schemas_source_check;
ALTER TABLE form_schemas DISABLE TRIGGER form_schemas_immutable;
ALTER TABLE form_schemas DISABLE TRIGGER form_schemas_revise_form;
UPDATE form_schemas SET source = 'suggested' WHERE source = 'inferred';
ALTER TABLE form_schemas ENABLE TRIGGER form_schemas_revise_form;
ALTER TABLE form_schemas ENABLE TRIGGER form_schemas_immutable;
ALTER TABLE form_schemas ADD CONSTRAINT form_schemas_source_check
    CHECK (source IN ('manual', 'suggested'));
ALTER TABLE form_schemas ALTER COLUMN source SET DEFAULT 'manual';

-- A check that could not run within its budget, or a stored schema that cannot be compiled,
-- quarantines the submission: `schema_unchecked`, `schema_error`.
ALTER TABLE submissions DROP CONSTRAINT submissions_reason_matches_status;
ALTER TABLE submissions ADD CONSTRAINT submissions_reason_matches_status CHECK (
    (status = 'accepted' AND reason IS NULL)
    OR (status = 'spam' AND reason IS NOT NULL AND reason IN ('honeypot', 'marked_spam'))
    OR (status = 'quarantined' AND reason IS NOT NULL AND reason IN ('origin_rejected',
        'rate_limited', 'turnstile_failed', 'turnstile_unavailable', 'schema_violation',
        'schema_unchecked', 'schema_error'))
);

-- Drift, aggregated: one row per form, hour, value path and keyword, counted by every
-- submission that broke it (paths and keywords only, never values). The first submission
-- of an hour to break a rule writes the `schema.drift` event; a flood adds to a count.
CREATE TABLE schema_drift (
    organization_id text NOT NULL,
    form_id         text NOT NULL,
    hour            timestamptz NOT NULL,
    path            text NOT NULL CHECK (length(path) <= 1024),
    keyword         text NOT NULL CHECK (length(keyword) <= 64),
    count           integer NOT NULL CHECK (count >= 1),
    first_seen      timestamptz NOT NULL,
    last_seen       timestamptz NOT NULL,
    CONSTRAINT schema_drift_key PRIMARY KEY (form_id, hour, path, keyword),
    FOREIGN KEY (form_id, organization_id) REFERENCES forms (id, organization_id) ON DELETE CASCADE
);
CREATE INDEX schema_drift_hour_idx ON schema_drift (hour);

-- How far inference has read a form's submissions: a pass reads only forms with
-- submissions newer than this (and than its latest version).
CREATE TABLE schema_inference (
    form_id         text PRIMARY KEY,
    organization_id text NOT NULL,
    scanned_through timestamptz NOT NULL,
    FOREIGN KEY (form_id, organization_id) REFERENCES forms (id, organization_id) ON DELETE CASCADE
);

ALTER TABLE schema_drift ENABLE ROW LEVEL SECURITY;
CREATE POLICY schema_drift_organization_scope ON schema_drift
    USING (organization_id = current_setting('postbag.organization_id', true))
    WITH CHECK (organization_id = current_setting('postbag.organization_id', true));
ALTER TABLE schema_inference ENABLE ROW LEVEL SECURITY;
CREATE POLICY schema_inference_organization_scope ON schema_inference
    USING (organization_id = current_setting('postbag.organization_id', true))
    WITH CHECK (organization_id = current_setting('postbag.organization_id', true));
GRANT SELECT, INSERT, UPDATE, DELETE ON schema_drift, schema_inference TO postbag_app;
