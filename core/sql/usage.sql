-- name: lock_organization_plan
-- The organization's plan, locking its row so concurrent creations count one at a time.
SELECT plan FROM organizations WHERE id = %(organization_id)s FOR UPDATE

-- name: organization_plan
-- The organization's plan.
SELECT plan FROM organizations WHERE id = %(organization_id)s

-- name: count_live_forms
-- How many forms the organization has that are not deleted.
SELECT count(*) AS n FROM forms WHERE organization_id = %(organization_id)s AND deleted_at IS NULL

-- name: count_live_destinations
-- How many destinations the organization has that are not deleted.
SELECT count(*) AS n
  FROM destinations
 WHERE organization_id = %(organization_id)s AND deleted_at IS NULL

-- name: count_live_api_keys
-- How many API keys the organization has that are not revoked.
SELECT count(*) AS n FROM api_keys WHERE organization_id = %(organization_id)s AND revoked_at IS NULL

-- name: count_form_schemas
-- How many schema versions a form has, with its organization's plan.
SELECT o.plan,
       (SELECT count(*) FROM form_schemas
         WHERE form_id = %(form_id)s AND organization_id = %(organization_id)s) AS n
  FROM organizations o
 WHERE o.id = %(organization_id)s

-- name: month_usage
-- The organization's counted submissions and attachment bytes in one calendar month
-- (absent row: none).
SELECT coalesce(u.submissions, 0) AS submissions, coalesce(u.attachment_bytes, 0) AS attachment_bytes
  FROM (SELECT 1) one
  LEFT JOIN usage_counters u
    ON u.organization_id = %(organization_id)s AND u.month = %(month)s

-- name: add_attachment_bytes
-- Count a submission's attachment bytes in its organization's month, unless that takes the
-- month past `limit` (null: unlimited); returns no row when refused. The row lock of the
-- upsert makes concurrent uploads count one after the other.
INSERT INTO usage_counters AS u (organization_id, month, attachment_bytes)
VALUES (%(organization_id)s, %(month)s, %(bytes)s)
ON CONFLICT (organization_id, month) DO UPDATE
   SET attachment_bytes = u.attachment_bytes + excluded.attachment_bytes
 WHERE %(limit)s::bigint IS NULL
    OR u.attachment_bytes + excluded.attachment_bytes <= %(limit)s::bigint
RETURNING u.attachment_bytes
