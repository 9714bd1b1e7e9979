-- Search finds what people type: `ada` finds ada@example.com, `example.net` and `sofa` find
-- the values that hold them, in any case (0026's full-text words matched whole words only).
-- A term matches the first 10,000 characters of the values' JSON text (field names
-- included), as a case-insensitive substring: `ILIKE`, answered by a trigram index.
--
-- pg_trgm is on every managed PostgreSQL and in Debian's postgresql-contrib; it is a trusted
-- extension, so the owner of the database creates it. The embedded PostgreSQL of `postbag
-- dev` (the pgserver wheel) has no pg_trgm: there the same statement reads the rows without
-- the index, which a development database's size allows.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm') THEN
        CREATE EXTENSION IF NOT EXISTS pg_trgm;
        -- Built under a lock that holds submits (26 s per 100,000 submissions on a loaded
        -- 2-core machine): on a large table, create it first with CREATE INDEX CONCURRENTLY
        -- under this name and definition, and this finds it (docs/deploy.md).
        CREATE INDEX IF NOT EXISTS submissions_values_trigram_idx ON submissions
            USING gin ((left("values"::text, 10000)) gin_trgm_ops);
    END IF;
END;
$$;

DROP INDEX submissions_search_idx;
ALTER TABLE submissions DROP COLUMN search;

-- One page of the organization's submissions whose readable values hold `anchor` and every
-- one of `others` and none of `excluded` (ILIKE patterns), newest first, with the list's
-- filters. It runs as the owner: row-level security lets no index answer an operator that
-- is not leakproof (ILIKE is not), so the trigram index would go unused under the policy.
-- The fence stays: the organization is the session's own `postbag.organization_id`, as the
-- policy reads it, never a parameter. The statement is planned with each call's values
-- (EXECUTE), so the planner weighs the anchor's own frequency, never a generic guess.
CREATE FUNCTION search_submissions(
    anchor text, others text[], excluded text[], readable_at timestamptz, in_form text,
    in_status text, with_flag text, since timestamptz, before_at timestamptz,
    before_id text, page_size integer
) RETURNS TABLE (
    id text, form_id text, status text, reason text, flags text[],
    received_at timestamptz, erase_at timestamptz, erased_at timestamptz
)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    RETURN QUERY EXECUTE
       'SELECT s.id, s.form_id, s.status, s.reason, s.flags, s.received_at, s.erase_at,
               s.erased_at
          FROM submissions s
         WHERE s.organization_id = current_setting(''postbag.organization_id'', true)
           AND left(s."values"::text, 10000) ILIKE $1
           AND left(s."values"::text, 10000) ILIKE ALL ($2)
           AND NOT left(s."values"::text, 10000) ILIKE ANY ($3)
           AND (s.erase_at IS NULL OR s.erase_at > $4)
           AND ($5::text IS NULL OR s.form_id = $5)
           AND ($6::text IS NULL OR s.status = $6)
           AND ($7::text IS NULL OR $7 = ANY (s.flags))
           AND ($8::timestamptz IS NULL OR s.received_at >= $8)
           AND ($9::timestamptz IS NULL OR (s.received_at, s.id) < ($9, $10))
         ORDER BY s.received_at DESC, s.id DESC
         LIMIT $11'
    USING anchor, others, excluded, readable_at, in_form, in_status, with_flag, since,
          before_at, before_id, page_size;
END;
$$;

REVOKE ALL ON FUNCTION search_submissions FROM PUBLIC;
GRANT EXECUTE ON FUNCTION search_submissions TO postbag_app;
