-- Dashboard sign-in sessions: the cookie holds a random id, the row holds its SHA-256,
-- the organization and key it was opened with, and the CSRF token of its forms.
CREATE TABLE dashboard_sessions (
    id_hash         bytea PRIMARY KEY,
    organization_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    api_key_id      text NOT NULL REFERENCES api_keys (id) ON DELETE CASCADE,
    csrf_token      text NOT NULL CHECK (length(csrf_token) >= 32),
    created_at      timestamptz NOT NULL DEFAULT now(),
    last_seen_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX dashboard_sessions_last_seen_idx ON dashboard_sessions (last_seen_at);

ALTER TABLE dashboard_sessions ENABLE ROW LEVEL SECURITY;
CREATE POLICY dashboard_sessions_organization_scope ON dashboard_sessions
    USING (organization_id = current_setting('postbag.organization_id', true))
    WITH CHECK (organization_id = current_setting('postbag.organization_id', true));
GRANT SELECT, INSERT, UPDATE, DELETE ON dashboard_sessions TO postbag_app;
