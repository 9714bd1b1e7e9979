-- name: list_api_keys
-- One page of the organization's live API keys, by id, after a cursor.
SELECT id, name, prefix, role, created_at, last_used_at
  FROM api_keys
 WHERE organization_id = %(organization_id)s
   AND revoked_at IS NULL
   AND (%(after)s::text IS NULL OR id > %(after)s)
 ORDER BY id
 LIMIT %(limit)s

-- name: live_api_key_role
-- The role of a live key of the organization (checked before it is revoked).
SELECT role FROM api_keys
 WHERE id = %(id)s AND organization_id = %(organization_id)s AND revoked_at IS NULL

-- name: revoke_api_key
-- Revoke a live key at once; returns nothing when there is no such live key.
UPDATE api_keys SET revoked_at = now()
 WHERE id = %(id)s AND organization_id = %(organization_id)s AND revoked_at IS NULL
RETURNING id
