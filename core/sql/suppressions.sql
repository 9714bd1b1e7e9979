-- name: suppress_addresses
-- Add mailboxes (their HMACs) to the installation's suppression list: no autoresponse goes
-- to them again. A mailbox already listed keeps its first reason.
INSERT INTO email_suppressions (recipient_hash, reason, created_at)
SELECT h, %(reason)s, %(now)s FROM unnest(%(hashes)s::bytea[]) AS h
ON CONFLICT (recipient_hash) DO NOTHING
