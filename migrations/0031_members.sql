-- People (docs/teams.md): members sign in to the dashboard with an email and a password
-- (argon2id) and an optional TOTP second factor; a member belongs to one or more
-- organizations with a role in each. Every token (invitation, reset, sign-in link, session)
-- is stored as its SHA-256 only.

-- A person, across organizations: not a tenant table. A member's row is visible to an
-- organization's scoped work only while they belong to it.
CREATE TABLE members (
    id              text PRIMARY KEY CHECK (id LIKE 'mem\_%'),
    email           text NOT NULL CHECK (length(email) BETWEEN 3 AND 320),
    -- argon2id (PHC string); none until the member first sets a password.
    password_hash   text,
    -- base32; a secret being set up waits in totp_pending until its first code is right.
    totp_secret     text,
    totp_pending    text,
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX members_email_key ON members (lower(email));

-- Each recovery code works once: using it deletes its row.
CREATE TABLE member_recovery_codes (
    member_id       text NOT NULL REFERENCES members (id) ON DELETE CASCADE,
    code_hash       bytea NOT NULL,
    PRIMARY KEY (member_id, code_hash)
);

CREATE TABLE memberships (
    organization_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    member_id       text NOT NULL REFERENCES members (id) ON DELETE CASCADE,
    role            text NOT NULL CHECK (role IN ('owner', 'admin', 'operator', 'viewer')),
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (organization_id, member_id)
);
CREATE INDEX memberships_member_idx ON memberships (member_id);

-- A one-time invitation to join an organization with a role, valid 7 days.
CREATE TABLE invitations (
    id              text PRIMARY KEY CHECK (id LIKE 'inv\_%'),
    organization_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    email           text NOT NULL CHECK (length(email) BETWEEN 3 AND 320),
    role            text NOT NULL CHECK (role IN ('owner', 'admin', 'operator', 'viewer')),
    token_hash      bytea NOT NULL UNIQUE,
    -- who invited: a member's or a key's name, or the command that made the first owner
    invited_by      text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    expires_at      timestamptz NOT NULL,
    accepted_at     timestamptz
);
CREATE INDEX invitations_organization_idx ON invitations (organization_id, id);

-- One-time links for a member: a password reset (1 hour), or a sign-in without a password
-- that only `postbag dev` prints for its local owner.
CREATE TABLE member_links (
    token_hash      bytea PRIMARY KEY,
    member_id       text NOT NULL REFERENCES members (id) ON DELETE CASCADE,
    kind            text NOT NULL CHECK (kind IN ('password_reset', 'sign_in')),
    expires_at      timestamptz NOT NULL,
    used_at         timestamptz
);
CREATE INDEX member_links_member_idx ON member_links (member_id);

-- Dashboard sessions are a member's now: the key-opened ones end here.
DELETE FROM dashboard_sessions;
ALTER TABLE dashboard_sessions DROP COLUMN api_key_id;
ALTER TABLE dashboard_sessions
    ADD COLUMN id text NOT NULL UNIQUE CHECK (id LIKE 'ses\_%'),
    ADD COLUMN member_id text NOT NULL REFERENCES members (id) ON DELETE CASCADE,
    ADD COLUMN user_agent text NOT NULL DEFAULT '' CHECK (length(user_agent) <= 300);
CREATE INDEX dashboard_sessions_member_idx ON dashboard_sessions (member_id);

ALTER TABLE memberships ENABLE ROW LEVEL SECURITY;
CREATE POLICY memberships_organization_scope ON memberships
    USING (organization_id = current_setting('postbag.organization_id', true))
    WITH CHECK (organization_id = current_setting('postbag.organization_id', true));
ALTER TABLE invitations ENABLE ROW LEVEL SECURITY;
CREATE POLICY invitations_organization_scope ON invitations
    USING (organization_id = current_setting('postbag.organization_id', true))
    WITH CHECK (organization_id = current_setting('postbag.organization_id', true));
ALTER TABLE members ENABLE ROW LEVEL SECURITY;
CREATE POLICY members_organization_scope ON members
    USING (EXISTS (SELECT 1 FROM memberships m
                    WHERE m.member_id = members.id
                      AND m.organization_id = current_setting('postbag.organization_id', true)));
GRANT SELECT, INSERT, UPDATE, DELETE ON memberships, invitations TO postbag_app;
-- Scoped work reads who a member is, never their secrets.
GRANT SELECT (id, email, created_at) ON members TO postbag_app;
