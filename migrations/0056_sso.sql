-- Single sign-on and sign-in policy per organization (docs/sso.md).

-- An organization's OpenID Connect provider: where it is, the client Postbag is there, the
-- email domains whose people it signs in, and the role a person signing in for the first
-- time joins with. The client secret is write-only (never answered).
CREATE TABLE organization_sso (
    organization_id text PRIMARY KEY REFERENCES organizations (id) ON DELETE CASCADE,
    issuer          text NOT NULL CHECK (length(issuer) BETWEEN 8 AND 2000),
    scopes          text NOT NULL DEFAULT 'openid email profile offline_access'
                    CHECK (length(scopes) <= 500),
    client_id       text NOT NULL CHECK (length(client_id) BETWEEN 1 AND 500),
    client_secret   text CHECK (length(client_secret) BETWEEN 1 AND 2000),
    default_role    text NOT NULL DEFAULT 'viewer'
                    CHECK (default_role IN ('owner', 'admin', 'operator', 'viewer')),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
-- "Sign in with SSO" finds the organization by the email's domain: each domain is one
-- organization's.
CREATE TABLE sso_domains (
    domain          text PRIMARY KEY CHECK (domain = lower(domain) AND length(domain) <= 253),
    organization_id text NOT NULL REFERENCES organization_sso (organization_id) ON DELETE CASCADE
);
CREATE INDEX sso_domains_organization_idx ON sso_domains (organization_id);

-- One sign-in under way: its state (hashed), the nonce and PKCE verifier it was sent with.
-- Used once; ten minutes at most.
CREATE TABLE sso_attempts (
    state_hash      bytea PRIMARY KEY,
    organization_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    nonce           text NOT NULL,
    code_verifier   text NOT NULL,
    expires_at      timestamptz NOT NULL
);
CREATE INDEX sso_attempts_expires_idx ON sso_attempts (expires_at);

-- The organization's sign-in policy.
ALTER TABLE organizations
    ADD COLUMN sso_required boolean NOT NULL DEFAULT false,
    ADD COLUMN two_factor_required boolean NOT NULL DEFAULT false,
    ADD COLUMN session_idle_minutes integer CHECK (session_idle_minutes BETWEEN 5 AND 720),
    ADD COLUMN session_absolute_hours integer CHECK (session_absolute_hours BETWEEN 1 AND 720);
-- An owner who may still sign in with a password when SSO is required (the IdP down).
ALTER TABLE memberships ADD COLUMN break_glass boolean NOT NULL DEFAULT false;
-- A session opened by single sign-on names the organization whose provider signed it in and
-- keeps the provider's refresh token, used every few minutes to ask the provider whether
-- the person may still sign in.
ALTER TABLE dashboard_sessions
    ADD COLUMN sso_organization_id text REFERENCES organizations (id) ON DELETE CASCADE,
    ADD COLUMN sso_refresh_token text,
    ADD COLUMN sso_checked_at timestamptz;

ALTER TABLE organization_sso ENABLE ROW LEVEL SECURITY;
CREATE POLICY organization_sso_organization_scope ON organization_sso
    USING (organization_id = current_setting('postbag.organization_id', true))
    WITH CHECK (organization_id = current_setting('postbag.organization_id', true));
ALTER TABLE sso_domains ENABLE ROW LEVEL SECURITY;
CREATE POLICY sso_domains_organization_scope ON sso_domains
    USING (organization_id = current_setting('postbag.organization_id', true))
    WITH CHECK (organization_id = current_setting('postbag.organization_id', true));
ALTER TABLE sso_attempts ENABLE ROW LEVEL SECURITY;
CREATE POLICY sso_attempts_organization_scope ON sso_attempts
    USING (organization_id = current_setting('postbag.organization_id', true));
GRANT SELECT, INSERT, UPDATE, DELETE ON organization_sso, sso_domains TO postbag_app;
-- Only the sign-in (as the owner) writes the attempts.
REVOKE ALL ON sso_attempts FROM postbag_app;
GRANT SELECT ON sso_attempts TO postbag_app;
