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

-- name: month_submissions
-- The organization's counted submissions in one calendar month (absent row: none).
SELECT coalesce(
    (SELECT submissions FROM usage_counters
      WHERE organization_id = %(organization_id)s AND month = %(month)s), 0) AS n
