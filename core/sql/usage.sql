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

-- name: month_usage
-- The organization's counted submissions, attachment bytes, review bytes and stream events
-- in one calendar month (the sum of its shards; no row: none).
SELECT coalesce(sum(u.submissions), 0)::bigint AS submissions,
       coalesce(sum(u.attachment_bytes), 0)::bigint AS attachment_bytes,
       coalesce(sum(u.review_bytes), 0)::bigint AS review_bytes,
       coalesce(sum(u.events), 0)::bigint AS events
  FROM usage_counters u
 WHERE u.organization_id = %(organization_id)s AND u.month = %(month)s

-- name: add_attachment_bytes
-- Count a submission's attachment bytes in its organization's month, unless that takes the
-- month past `limit` (null: unlimited); returns no row when refused. The row lock of the
-- upsert (of shard 0, which alone counts bytes) makes concurrent uploads count one after
-- the other.
INSERT INTO usage_counters AS u (organization_id, month, shard, attachment_bytes)
VALUES (%(organization_id)s, %(month)s, 0, %(bytes)s)
ON CONFLICT (organization_id, month, shard) DO UPDATE
   SET attachment_bytes = u.attachment_bytes + excluded.attachment_bytes
 WHERE %(limit)s::bigint IS NULL
    OR u.attachment_bytes + excluded.attachment_bytes <= %(limit)s::bigint
RETURNING u.attachment_bytes
