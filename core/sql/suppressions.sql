-- name: suppress_addresses
-- Add mailboxes (their HMACs) to the installation's suppression list: no autoresponse goes
-- to them again. A mailbox already listed keeps its first reason.
INSERT INTO email_suppressions (recipient_hash, reason, created_at)
SELECT h, %(reason)s, %(now)s FROM unnest(%(hashes)s::bytea[]) AS h
ON CONFLICT (recipient_hash) DO NOTHING

-- name: is_suppressed
-- Whether a mailbox is on the suppression list (checked again before an autoresponse is
-- sent: an unsubscribe between its plan and a retry stops it).
SELECT EXISTS (SELECT 1 FROM email_suppressions WHERE recipient_hash = %(hash)s) AS suppressed
