-- name: get_organization_email
-- The organization's own email sender, with its write-only secret (for sending only).
SELECT organization_id, provider, from_address, smtp_host, smtp_port, smtp_username,
       smtp_tls, ses_region, ses_access_key_id, secret, updated_at
  FROM organization_email
 WHERE organization_id = %(organization_id)s

-- name: put_organization_email
-- Set the organization's own sender; a secret left out (null) keeps the stored one when the
-- provider stays the same. The kept secret is read into the proposed row itself: its checks
-- (a Resend sender has a key) apply before ON CONFLICT turns it into an update.
INSERT INTO organization_email AS e (organization_id, provider, from_address, smtp_host,
                                     smtp_port, smtp_username, smtp_tls, ses_region,
                                     ses_access_key_id, secret, updated_at)
VALUES (%(organization_id)s, %(provider)s, %(from_address)s, %(smtp_host)s, %(smtp_port)s,
        %(smtp_username)s, %(smtp_tls)s, %(ses_region)s, %(ses_access_key_id)s,
        coalesce(%(secret)s::text,
                 (SELECT k.secret FROM organization_email k
                   WHERE k.organization_id = %(organization_id)s
                     AND k.provider = %(provider)s)),
        %(now)s)
ON CONFLICT (organization_id) DO UPDATE
   SET provider = excluded.provider, from_address = excluded.from_address,
       smtp_host = excluded.smtp_host, smtp_port = excluded.smtp_port,
       smtp_username = excluded.smtp_username, smtp_tls = excluded.smtp_tls,
       ses_region = excluded.ses_region, ses_access_key_id = excluded.ses_access_key_id,
       secret = excluded.secret, updated_at = excluded.updated_at
RETURNING organization_id, provider, from_address, smtp_host, smtp_port, smtp_username,
          smtp_tls, ses_region, ses_access_key_id, secret, updated_at

-- name: delete_organization_email
-- Back to the installation's provider.
DELETE FROM organization_email WHERE organization_id = %(organization_id)s

-- name: organization_senders
-- The own senders of the organizations a deliver pass sends email for (as the owner).
SELECT organization_id, provider, from_address, smtp_host, smtp_port, smtp_username,
       smtp_tls, ses_region, ses_access_key_id, secret, updated_at
  FROM organization_email
 WHERE organization_id = ANY (%(organization_ids)s::text[])
