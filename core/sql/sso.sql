-- name: get_sso
-- The organization's single sign-on, without its client secret.
SELECT issuer, client_id, client_secret IS NOT NULL AS has_client_secret, scopes,
       default_role, updated_at,
       ARRAY(SELECT domain FROM sso_domains d
              WHERE d.organization_id = s.organization_id ORDER BY domain) AS allowed_domains
  FROM organization_sso s
 WHERE organization_id = %(organization_id)s

-- name: upsert_sso
-- Set the organization's single sign-on; no client secret given keeps the one stored.
INSERT INTO organization_sso (organization_id, issuer, client_id, client_secret, scopes,
                              default_role, updated_at)
VALUES (%(organization_id)s, %(issuer)s, %(client_id)s, %(client_secret)s, %(scopes)s,
        %(default_role)s, %(now)s)
ON CONFLICT (organization_id) DO UPDATE
   SET issuer = EXCLUDED.issuer, client_id = EXCLUDED.client_id,
       client_secret = coalesce(EXCLUDED.client_secret, organization_sso.client_secret),
       scopes = EXCLUDED.scopes, default_role = EXCLUDED.default_role,
       updated_at = EXCLUDED.updated_at

-- name: clear_sso_domains
-- Forget the organization's SSO domains (before they are set again).
DELETE FROM sso_domains WHERE organization_id = %(organization_id)s

-- name: insert_sso_domain
-- One SSO domain of the organization; nothing when another organization holds it.
INSERT INTO sso_domains (domain, organization_id)
VALUES (%(domain)s, %(organization_id)s)
ON CONFLICT (domain) DO NOTHING
RETURNING domain

-- name: delete_sso
-- Turn the organization's single sign-on off (its domains go with it), and the policy
-- that requires it.
WITH gone AS (
    DELETE FROM organization_sso WHERE organization_id = %(organization_id)s
    RETURNING organization_id
)
UPDATE organizations SET sso_required = false
 WHERE id = %(organization_id)s AND EXISTS (SELECT 1 FROM gone)
RETURNING id

-- name: get_policy
-- The organization's sign-in policy and its break-glass owners.
SELECT sso_required, two_factor_required, session_idle_minutes, session_absolute_hours,
       ARRAY(SELECT member_id FROM memberships ms
              WHERE ms.organization_id = o.id AND ms.break_glass ORDER BY member_id)
       AS break_glass,
       EXISTS (SELECT 1 FROM organization_sso s WHERE s.organization_id = o.id) AS has_sso
  FROM organizations o
 WHERE id = %(organization_id)s

-- name: update_policy
-- Set the organization's sign-in policy.
UPDATE organizations
   SET sso_required = %(sso_required)s, two_factor_required = %(two_factor_required)s,
       session_idle_minutes = %(session_idle_minutes)s,
       session_absolute_hours = %(session_absolute_hours)s
 WHERE id = %(organization_id)s

-- name: set_break_glass
-- Mark exactly these owners break-glass; the owners marked.
UPDATE memberships
   SET break_glass = (member_id = ANY(%(members)s::text[]) AND role = 'owner')
 WHERE organization_id = %(organization_id)s
RETURNING member_id, break_glass

-- name: sso_for_domain
-- The single sign-on an email domain belongs to (the sign-in page's lookup).
SELECT s.organization_id, s.issuer, s.client_id, s.client_secret, s.scopes, s.default_role
  FROM sso_domains d
  JOIN organization_sso s ON s.organization_id = d.organization_id
 WHERE d.domain = %(domain)s

-- name: sso_of_organization
-- An organization's single sign-on with its secret and domains (the callback's).
SELECT s.organization_id, s.issuer, s.client_id, s.client_secret, s.scopes, s.default_role,
       ARRAY(SELECT domain FROM sso_domains d
              WHERE d.organization_id = s.organization_id) AS allowed_domains
  FROM organization_sso s
 WHERE s.organization_id = %(organization_id)s

-- name: insert_sso_attempt
-- A sign-in sent to the provider: its state (hashed), nonce and PKCE verifier.
INSERT INTO sso_attempts (state_hash, organization_id, nonce, code_verifier, expires_at)
VALUES (%(state_hash)s, %(organization_id)s, %(nonce)s, %(code_verifier)s, %(expires_at)s)

-- name: take_sso_attempt
-- The sign-in a state belongs to, used once: deleted as it is read.
DELETE FROM sso_attempts
 WHERE state_hash = %(state_hash)s
RETURNING organization_id, nonce, code_verifier, expires_at

-- name: prune_sso_attempts
-- Sign-ins never completed, past their ten minutes.
DELETE FROM sso_attempts WHERE expires_at < %(now)s

-- name: sso_session_organization
-- Where a member signing in with a password or a link may open a session: the
-- organization asked for unless it requires single sign-on (but for its break-glass
-- owners), else the first of theirs that does not.
SELECT o.id
  FROM memberships ms
  JOIN organizations o ON o.id = ms.organization_id
 WHERE ms.member_id = %(member_id)s
   AND (NOT o.sso_required OR (ms.role = 'owner' AND ms.break_glass))
 ORDER BY o.id = %(organization_id)s DESC, ms.created_at, o.id
 LIMIT 1

-- name: sso_sessions_due
-- The session's refresh token, when its provider is due to be asked again.
SELECT s.sso_refresh_token, s.sso_organization_id
  FROM dashboard_sessions s
 WHERE s.id = %(id)s AND s.sso_refresh_token IS NOT NULL
   AND (s.sso_checked_at IS NULL OR s.sso_checked_at <= %(due)s)

-- name: sso_session_checked
-- The provider said yes again: keep its (possibly new) refresh token.
UPDATE dashboard_sessions
   SET sso_checked_at = %(now)s, sso_refresh_token = %(refresh_token)s
 WHERE id = %(id)s

-- name: end_session_by_id
-- The provider said no: the session ends.
DELETE FROM dashboard_sessions WHERE id = %(id)s
