-- An organization's own email sender (docs/autoresponse.md#each-organizations-own-sender):
-- when set, the emails of its destinations, notices, acknowledgements and autoresponses go
-- through it instead of the installation's provider. `secret` (the SMTP password or the
-- Resend API key, the SES secret access key) is write-only: the API says whether one is set, never what it is.
CREATE TABLE organization_email (
    organization_id text PRIMARY KEY REFERENCES organizations (id) ON DELETE CASCADE,
    provider        text NOT NULL CHECK (provider IN ('smtp', 'resend', 'ses')),
    from_address    text NOT NULL CHECK (length(from_address) <= 320),
    smtp_host       text CHECK (length(smtp_host) <= 253),
    smtp_port       integer CHECK (smtp_port BETWEEN 1 AND 65535),
    smtp_username   text CHECK (length(smtp_username) <= 256),
    smtp_tls        text CHECK (smtp_tls IN ('starttls', 'tls')),
    ses_region      text CHECK (ses_region ~ '^[a-z]{2}(-[a-z]+)+-[0-9]$'),
    ses_access_key_id text CHECK (length(ses_access_key_id) <= 128),
    secret          text CHECK (length(secret) <= 1024),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT organization_email_smtp_has_host CHECK (
        provider <> 'smtp' OR (smtp_host IS NOT NULL AND smtp_port IS NOT NULL
                               AND smtp_tls IS NOT NULL)),
    CONSTRAINT organization_email_resend_has_key CHECK (provider <> 'resend' OR secret IS NOT NULL),
    CONSTRAINT organization_email_ses_has_account CHECK (
        provider <> 'ses' OR (ses_region IS NOT NULL AND ses_access_key_id IS NOT NULL
                              AND secret IS NOT NULL))
);
ALTER TABLE organization_email ENABLE ROW LEVEL SECURITY;
CREATE POLICY organization_email_organization_scope ON organization_email
    USING (organization_id = current_setting('postbag.organization_id', true))
    WITH CHECK (organization_id = current_setting('postbag.organization_id', true));
GRANT SELECT, INSERT, UPDATE, DELETE ON organization_email TO postbag_app;
