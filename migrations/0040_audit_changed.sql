-- What a change changed, by name: the settings a `form.updated` set to new values (never
-- the values). Null for every other row, and for every row before this column: a row's
-- hash covers it only when it is set (core/owner/audit.py `chain_hash`), so the chains
-- written before verify as they did.
ALTER TABLE audit_log ADD COLUMN changed text[]
    CHECK (cardinality(changed) BETWEEN 1 AND 50);
