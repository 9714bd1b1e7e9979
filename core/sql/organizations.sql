-- name: insert_organization
-- Create an organization on a plan.
INSERT INTO organizations (id, name, plan) VALUES (%(id)s, %(name)s, %(plan)s)
RETURNING id, name, plan, created_at

-- name: set_plan
-- Change an organization's plan; returns nothing when the organization does not exist.
UPDATE organizations SET plan = %(plan)s WHERE id = %(id)s RETURNING id, plan

-- name: insert_api_key
-- Store a new API key by its hash only.
INSERT INTO api_keys (id, organization_id, name, prefix, key_hash, role)
VALUES (%(id)s, %(organization_id)s, %(name)s, %(prefix)s, %(key_hash)s, %(role)s)
RETURNING id, name, prefix, role, created_at

-- name: authenticate_api_key
-- The live key with this hash, its organization, name and role; marks it used.
UPDATE api_keys SET last_used_at = now()
 WHERE key_hash = %(key_hash)s AND revoked_at IS NULL
RETURNING id, organization_id, name, role

-- name: list_organizations
-- Every organization, oldest first, for the operator's `postbag orgs`.
SELECT id, name, plan, created_at FROM organizations ORDER BY created_at, id

-- name: get_organization
-- One organization by id (the operator's `postbag create-key`).
SELECT id, name, plan FROM organizations WHERE id = %(id)s

-- name: lock_organizations
-- Serialise the local runner's first start (held until the transaction ends).
LOCK TABLE organizations IN SHARE ROW EXCLUSIVE MODE

-- name: owner_of_form
-- The organization of a live form, across organizations (the operator's `postbag listen`).
SELECT organization_id FROM forms WHERE id = %(id)s AND deleted_at IS NULL

-- name: owner_of_destination
-- The organization of a live destination, across organizations (`postbag listen`).
SELECT organization_id FROM destinations WHERE id = %(id)s AND deleted_at IS NULL
