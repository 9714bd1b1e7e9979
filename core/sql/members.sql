-- name: member_by_email
-- A member by address, in any case (the owner's lookup: sign-in, invitations, resets).
SELECT id, email AS address, password_hash, totp_secret
  FROM members
 WHERE lower(email) = lower(%(email)s)

-- name: member_by_id
-- A member's credentials (the owner's lookup).
SELECT id, email AS address, password_hash, totp_secret, totp_pending
  FROM members
 WHERE id = %(id)s

-- name: insert_member
-- A new member; none when the address is already a member's (then look it up).
INSERT INTO members (id, email, password_hash)
VALUES (%(id)s, %(email)s, %(password_hash)s)
ON CONFLICT DO NOTHING
RETURNING id

-- name: set_member_password
-- A member's new password (argon2id), and the password resets they had not used end.
WITH used AS (
    UPDATE member_links SET used_at = %(now)s
     WHERE member_id = %(id)s AND kind = 'password_reset' AND used_at IS NULL
)
UPDATE members SET password_hash = %(password_hash)s WHERE id = %(id)s

-- name: insert_membership
-- A member joins an organization with a role; nothing when they already belong to it.
INSERT INTO memberships (organization_id, member_id, role)
VALUES (%(organization_id)s, %(member_id)s, %(role)s)
ON CONFLICT DO NOTHING
RETURNING member_id

-- name: list_members
-- One page of the organization's members, by id, after a cursor.
SELECT m.id, m.email, ms.role, ms.created_at AS joined_at
  FROM memberships ms
  JOIN members m ON m.id = ms.member_id
 WHERE ms.organization_id = %(organization_id)s
   AND (%(after)s::text IS NULL OR m.id > %(after)s)
 ORDER BY m.id
 LIMIT %(limit)s

-- name: member_of_organization
-- Whether an address is a member's in the organization (any case).
SELECT m.id
  FROM memberships ms
  JOIN members m ON m.id = ms.member_id
 WHERE ms.organization_id = %(organization_id)s AND lower(m.email) = lower(%(email)s)

-- name: delete_all_member_sessions
-- Every session of a member ends (a password reset).
DELETE FROM dashboard_sessions WHERE member_id = %(member_id)s

-- name: lock_owners
-- The organization's owners, locked in id order: a change that could remove the last one
-- waits for any other such change, and then sees it.
SELECT member_id
  FROM memberships
 WHERE organization_id = %(organization_id)s AND role = 'owner'
 ORDER BY member_id
   FOR UPDATE

-- name: membership_role
-- A member's role in the organization, locked for a change.
SELECT ms.role, m.email
  FROM memberships ms
  JOIN members m ON m.id = ms.member_id
 WHERE ms.organization_id = %(organization_id)s AND ms.member_id = %(member_id)s
   FOR UPDATE OF ms

-- name: set_membership_role
-- A member's new role in the organization.
UPDATE memberships SET role = %(role)s
 WHERE organization_id = %(organization_id)s AND member_id = %(member_id)s

-- name: delete_membership
-- A member leaves the organization, and their sessions in it end.
WITH ended AS (
    DELETE FROM dashboard_sessions
     WHERE organization_id = %(organization_id)s AND member_id = %(member_id)s
)
DELETE FROM memberships
 WHERE organization_id = %(organization_id)s AND member_id = %(member_id)s

-- name: member_organizations
-- The organizations a member belongs to, with their role, the first joined first.
SELECT o.id, o.name, ms.role
  FROM memberships ms
  JOIN organizations o ON o.id = ms.organization_id
 WHERE ms.member_id = %(member_id)s
 ORDER BY ms.created_at, o.id

-- name: first_owner
-- The installation's first owner: the oldest owner of the oldest organization (the member
-- `postbag dev` signs in from its printed link).
SELECT ms.member_id
  FROM organizations o
  JOIN memberships ms ON ms.organization_id = o.id AND ms.role = 'owner'
 ORDER BY o.created_at, o.id, ms.created_at, ms.member_id
 LIMIT 1

-- name: lock_invitations
-- Serialise the invitations of one organization until the transaction ends: the daily
-- bounds are counted by the next statement, with a snapshot taken after the lock.
SELECT pg_advisory_xact_lock(hashtextextended('postbag.invitations:' || %(organization_id)s, 0))

-- name: count_recent_invitations
-- The organization's invitations emailed since `since` (pending, accepted or withdrawn),
-- and this address's, with the oldest of each (when the next one may go).
SELECT count(*)::int AS organization,
       min(created_at) AS organization_oldest,
       (count(*) FILTER (WHERE lower(email) = lower(%(email)s)))::int AS address,
       min(created_at) FILTER (WHERE lower(email) = lower(%(email)s)) AS address_oldest
  FROM invitations
 WHERE organization_id = %(organization_id)s AND created_at > %(since)s

-- name: insert_invitation
-- A one-time invitation (its token's hash only), with who sent it.
INSERT INTO invitations (id, organization_id, email, role, token_hash, invited_by, sender_kind,
                         sender_id, created_at, expires_at)
VALUES (%(id)s, %(organization_id)s, %(email)s, %(role)s, %(token_hash)s, %(invited_by)s,
        %(sender_kind)s, %(sender_id)s, %(now)s, %(expires_at)s)

-- name: delete_invitation
-- An invitation whose email could not be sent.
DELETE FROM invitations WHERE id = %(id)s

-- name: replace_invitations
-- The address's earlier pending invitations are withdrawn once a new one is emailed.
UPDATE invitations SET withdrawn_at = %(now)s
 WHERE organization_id = %(organization_id)s AND lower(email) = lower(%(email)s)
   AND (created_at, id) < (%(created_at)s, %(id)s)
   AND accepted_at IS NULL AND withdrawn_at IS NULL AND expires_at > %(now)s

-- name: list_invitations
-- One page of the organization's pending invitations, by id, after a cursor.
SELECT id, email, role, invited_by, sender_kind, sender_id, created_at, expires_at
  FROM invitations
 WHERE organization_id = %(organization_id)s
   AND accepted_at IS NULL AND withdrawn_at IS NULL AND expires_at > %(now)s
   AND (%(after)s::text IS NULL OR id > %(after)s)
 ORDER BY id
 LIMIT %(limit)s

-- name: pending_invitation
-- A pending invitation of the organization (its address and role), to send again.
SELECT id, email AS address, role
  FROM invitations
 WHERE id = %(id)s AND organization_id = %(organization_id)s
   AND accepted_at IS NULL AND withdrawn_at IS NULL AND expires_at > %(now)s

-- name: withdraw_invitation
-- Withdraw a pending invitation of the organization; nothing when there is none.
UPDATE invitations SET withdrawn_at = %(now)s
 WHERE id = %(id)s AND organization_id = %(organization_id)s
   AND accepted_at IS NULL AND withdrawn_at IS NULL AND expires_at > %(now)s
RETURNING id

-- name: open_invitation
-- A live invitation by its token's hash, with its organization's name.
SELECT i.id, i.organization_id, i.email AS address, i.role, i.invited_by, i.sender_kind,
       i.sender_id, o.name AS organization_name
  FROM invitations i
  JOIN organizations o ON o.id = i.organization_id
 WHERE i.token_hash = %(token_hash)s AND i.accepted_at IS NULL AND i.withdrawn_at IS NULL
   AND i.expires_at > %(now)s

-- name: invitation_sender_role
-- The role an invitation's sender holds now in its organization: a member's while they
-- belong to it, a key's while it is live; none once they are gone. Locked (in an
-- acceptance's transaction) so that a demotion, removal or revocation waits for it.
SELECT coalesce(
         (SELECT role FROM memberships
           WHERE %(sender_kind)s = 'member' AND organization_id = %(organization_id)s
             AND member_id = %(sender_id)s
             FOR SHARE),
         (SELECT role FROM api_keys
           WHERE %(sender_kind)s = 'key' AND organization_id = %(organization_id)s
             AND id = %(sender_id)s AND revoked_at IS NULL
             FOR SHARE)
       ) AS role

-- name: accept_invitation
-- Use a live invitation once; nothing when it was used or withdrawn meanwhile.
UPDATE invitations SET accepted_at = %(now)s
 WHERE id = %(id)s AND accepted_at IS NULL AND withdrawn_at IS NULL AND expires_at > %(now)s
RETURNING id

-- name: insert_member_link
-- A one-time link for a member (its token's hash only).
INSERT INTO member_links (token_hash, member_id, kind, expires_at)
VALUES (%(token_hash)s, %(member_id)s, %(kind)s, %(expires_at)s)

-- name: queue_password_reset
-- A password reset asked for `email`, in one statement that writes whatever the address:
-- the address's count (%(recipient_hash)s) moves on when it is within its bound (at most
-- %(bound)s in a window of %(window)s from the first; a new window once it has ended),
-- under the count row's lock, so requests racing from any number of clients cannot pass
-- it. Within it, for a member of an organization: the link (its token's hash) and the
-- email's delivery (kind `account`, in the member's first organization, due now).
WITH counted AS (
    INSERT INTO reset_counts AS c (recipient_hash, window_start, sent)
    VALUES (%(recipient_hash)s, %(now)s, 1)
    ON CONFLICT (recipient_hash) DO UPDATE
       SET window_start = CASE WHEN c.window_start <= %(now)s - %(window)s
                               THEN %(now)s ELSE c.window_start END,
           sent = CASE WHEN c.window_start <= %(now)s - %(window)s THEN 1 ELSE c.sent + 1 END
     WHERE c.window_start <= %(now)s - %(window)s OR c.sent < %(bound)s
    RETURNING recipient_hash
),
member AS (
    SELECT m.id, m.email, f.organization_id
      FROM members m
     CROSS JOIN LATERAL (
        SELECT ms.organization_id FROM memberships ms WHERE ms.member_id = m.id
         ORDER BY ms.created_at, ms.organization_id LIMIT 1) f
     WHERE lower(m.email) = lower(%(email)s) AND EXISTS (SELECT 1 FROM counted)
),
link AS (
    INSERT INTO member_links (token_hash, member_id, kind, expires_at)
    SELECT %(token_hash)s, id, 'password_reset', %(expires_at)s FROM member
)
INSERT INTO deliveries (id, organization_id, kind, channel, max_attempts, next_attempt_at,
                        payload, target, created_at, updated_at)
SELECT %(id)s, m.organization_id, 'account', t.name, t.max_attempts, %(now)s,
       %(payload)s, jsonb_build_object('to', jsonb_build_array(m.email)), %(now)s, %(now)s
  FROM member m
  JOIN destination_types t ON t.name = 'email'

-- name: use_member_link
-- Use a live link of this kind once; its member, or nothing.
UPDATE member_links SET used_at = %(now)s
 WHERE token_hash = %(token_hash)s AND kind = %(kind)s AND used_at IS NULL
   AND expires_at > %(now)s
RETURNING member_id

-- name: live_member_link
-- Whether a link of this kind is live (the reset page, before it is used).
SELECT member_id
  FROM member_links
 WHERE token_hash = %(token_hash)s AND kind = %(kind)s AND used_at IS NULL
   AND expires_at > %(now)s

-- name: set_totp_pending
-- A TOTP secret being set up: it counts once its first code is right.
UPDATE members SET totp_pending = %(secret)s WHERE id = %(id)s

-- name: confirm_totp
-- The pending secret becomes the member's second factor; nothing when none was pending.
UPDATE members SET totp_secret = totp_pending, totp_pending = NULL
 WHERE id = %(id)s AND totp_pending = %(secret)s
RETURNING id

-- name: clear_totp
-- Turn the second factor off, with its recovery codes.
WITH codes AS (DELETE FROM member_recovery_codes WHERE member_id = %(id)s)
UPDATE members SET totp_secret = NULL, totp_pending = NULL WHERE id = %(id)s

-- name: replace_recovery_codes
-- A member's new recovery codes (hashes), in place of any earlier ones.
WITH old AS (DELETE FROM member_recovery_codes WHERE member_id = %(id)s)
INSERT INTO member_recovery_codes (member_id, code_hash)
SELECT %(id)s, unnest(%(hashes)s::bytea[])

-- name: accept_totp_step
-- Accept a TOTP code's time step once: recorded only when later than the last one accepted
-- for the member, in this one statement (of two clients sending one code, one gets the row).
UPDATE members SET totp_last_step = %(step)s
 WHERE id = %(id)s AND (totp_last_step IS NULL OR totp_last_step < %(step)s)
RETURNING id

-- name: use_recovery_code
-- Use a recovery code once: its row goes.
DELETE FROM member_recovery_codes
 WHERE member_id = %(id)s AND code_hash = %(code_hash)s
RETURNING member_id

-- name: count_recovery_codes
-- How many of a member's recovery codes are left.
SELECT count(*)::int AS n FROM member_recovery_codes WHERE member_id = %(id)s
