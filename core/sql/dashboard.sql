-- name: insert_dashboard_session
-- Open a dashboard session for a member in one of their organizations (by single sign-on:
-- the organization whose provider signed them in, and its refresh token).
INSERT INTO dashboard_sessions (id, id_hash, organization_id, member_id, csrf_token, user_agent,
                                created_at, last_seen_at, sso_organization_id,
                                sso_refresh_token, sso_checked_at)
VALUES (%(id)s, %(id_hash)s, %(organization_id)s, %(member_id)s, %(csrf_token)s, %(user_agent)s,
        %(now)s, %(now)s, %(sso_organization_id)s, %(sso_refresh_token)s,
        CASE WHEN %(sso_organization_id)s::text IS NULL THEN NULL ELSE %(now)s END)

-- name: touch_dashboard_session
-- The live session with this id (its member still in its organization, not idle or older
-- than the organization's policy allows, signed in the way it requires), marked seen now,
-- with the member's role there, every organization they belong to, and whether the policy
-- sends them to set up two-factor sign-in first.
UPDATE dashboard_sessions s
   SET last_seen_at = %(now)s
  FROM memberships ms, members m, organizations o
 WHERE s.id_hash = %(id_hash)s
   AND s.last_seen_at > %(now)s - make_interval(
           secs => coalesce(o.session_idle_minutes * 60, %(idle_seconds)s))
   AND (o.session_absolute_hours IS NULL
        OR s.created_at > %(now)s - make_interval(hours => o.session_absolute_hours))
   AND ms.organization_id = s.organization_id AND ms.member_id = s.member_id
   AND (NOT o.sso_required OR s.sso_organization_id = o.id
        OR (ms.role = 'owner' AND ms.break_glass))
   AND m.id = s.member_id
   AND o.id = s.organization_id
RETURNING s.id, s.organization_id, s.csrf_token, s.member_id, m.email AS address, ms.role,
          o.name AS organization_name,
          (o.two_factor_required AND m.totp_secret IS NULL
           AND s.sso_organization_id IS DISTINCT FROM o.id) AS two_factor_missing,
          (s.sso_refresh_token IS NOT NULL AND s.sso_checked_at <= %(sso_due)s) AS sso_due,
          (SELECT coalesce(json_agg(json_build_object('id', mo.id, 'name', mo.name)
                                    ORDER BY mm.created_at, mo.id), '[]')
             FROM memberships mm JOIN organizations mo ON mo.id = mm.organization_id
            WHERE mm.member_id = s.member_id) AS organizations

-- name: member_sessions
-- A member's sessions, in any organization, the most recently seen first.
SELECT s.id, s.user_agent, s.created_at, s.last_seen_at, o.name AS organization_name
  FROM dashboard_sessions s
  JOIN organizations o ON o.id = s.organization_id
 WHERE s.member_id = %(member_id)s
   AND s.last_seen_at > %(now)s - make_interval(secs => %(idle_seconds)s)
 ORDER BY s.last_seen_at DESC, s.id

-- name: delete_member_session
-- End one of the member's own sessions; nothing when it is not theirs.
DELETE FROM dashboard_sessions
 WHERE id = %(id)s AND member_id = %(member_id)s
RETURNING id

-- name: switch_session_organization
-- Move a session to another organization the member belongs to (and whose policy lets the
-- session's way of signing in through); nothing otherwise. A session opened by single
-- sign-on stays in the organization whose provider signed the person in.
UPDATE dashboard_sessions s
   SET organization_id = %(organization_id)s
  FROM memberships ms, organizations o
 WHERE s.id_hash = %(id_hash)s
   AND ms.member_id = s.member_id AND ms.organization_id = %(organization_id)s
   AND o.id = ms.organization_id
   AND (NOT o.sso_required OR s.sso_organization_id = o.id
        OR (ms.role = 'owner' AND ms.break_glass))
   AND (s.sso_organization_id IS NULL OR s.sso_organization_id = o.id)
RETURNING s.id

-- name: delete_dashboard_session
-- Sign out: forget the session.
DELETE FROM dashboard_sessions WHERE id_hash = %(id_hash)s

-- name: delete_idle_dashboard_sessions
-- Forget sessions idle for longer than the limit.
DELETE FROM dashboard_sessions
 WHERE last_seen_at <= %(now)s - make_interval(secs => %(idle_seconds)s)

-- name: delivery_counts_for_submissions
-- For the inbox's one-line summary: how many of each submission's deliveries are in each state.
SELECT submission_id, status, count(*)::int AS n
  FROM deliveries
 WHERE organization_id = %(organization_id)s AND submission_id = ANY(%(ids)s::text[])
 GROUP BY submission_id, status

-- name: destination_success_rates
-- Share of each destination's finished deliveries of the last 7 days that were sent.
SELECT destination_id,
       count(*) FILTER (WHERE status = 'sent')::int AS sent,
       count(*) FILTER (WHERE status IN ('sent', 'dead', 'failed'))::int AS finished
  FROM deliveries
 WHERE organization_id = %(organization_id)s AND destination_id IS NOT NULL
   AND created_at > %(now)s - interval '7 days'
 GROUP BY destination_id

-- name: recent_events
-- The organization's newest events, newest first.
SELECT id, type, subject_id, data, created_at
  FROM events
 WHERE organization_id = %(organization_id)s
 ORDER BY id DESC
 LIMIT %(limit)s
