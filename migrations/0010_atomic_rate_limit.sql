-- The rate limit counted in the submit statement's own transaction (`insert_submission`).
-- Before, the client's recent submissions were counted by the form lookup, before the
-- insert and without a lock: concurrent posts all saw the same count (40 concurrent posts
-- against `max: 5` stored 21 accepted). Now every submit takes one transaction-scoped
-- advisory lock per form and client (held to the commit) and then counts, in a VOLATILE
-- function so the count takes a fresh snapshot after the lock (READ COMMITTED) and sees
-- every submission of that client committed before it. The same lock covers the key-less
-- double-submit lookup (postbag_previous_keyless_submission took a lock per form, client
-- and payload; this one per form and client serialises a superset), so a submit takes one
-- lock, in one order, and stays one statement. It returns one row, and says so (ROWS 1):
-- at the default estimate of 1000 rows the statement's cost passed the JIT threshold and
-- each submit spent about a second compiling expressions.
CREATE FUNCTION postbag_submit_gate(
    p_form_id text,
    p_client_hash bytea,
    p_rate_since timestamptz,
    p_rate_max integer,
    p_keyless boolean,
    p_payload_hash bytea,
    p_repeat_since timestamptz
) RETURNS TABLE (recent bigint, previous_id text, previous_hash bytea)
LANGUAGE plpgsql VOLATILE ROWS 1 AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(
        hashtextextended('postbag.submit:' || p_form_id || ':' || encode(p_client_hash, 'hex'), 0));
    RETURN QUERY
        SELECT (SELECT count(*) FROM (
                    SELECT 1 FROM submissions c
                     WHERE c.form_id = p_form_id AND c.client_hash = p_client_hash
                       AND c.received_at > p_rate_since
                     LIMIT p_rate_max) r),
               p.id, p.payload_hash
          FROM (SELECT 1) one
          LEFT JOIN LATERAL (
              -- "No key" as `coalesce(idempotency_key, '') = ''`: see 0007.
              SELECT s.id, s.payload_hash
                FROM submissions s
               WHERE p_keyless
                 AND s.form_id = p_form_id
                 AND coalesce(s.idempotency_key, '') = ''
                 AND s.client_hash = p_client_hash
                 AND s.payload_hash = p_payload_hash
                 AND s.received_at > p_repeat_since
               LIMIT 1) p ON true;
END
$$;

-- Acknowledgement emails per recipient address and UTC day, across the installation, so a
-- public form cannot be used to mail someone over and over. The address is kept only as
-- an HMAC keyed with POSTBAG_SECRET_KEY. The submit statement counts with an upsert whose
-- update only happens under the cap: concurrent submits wait on the row and re-check it.
CREATE TABLE acknowledgement_counts (
    recipient_hash bytea   NOT NULL,
    day            date    NOT NULL,
    sent           integer NOT NULL CHECK (sent >= 1),
    PRIMARY KEY (recipient_hash, day)
);

-- The gate above replaces the key-less lookup of 0007 in the submit statement.
DROP FUNCTION postbag_previous_keyless_submission(bigint, text, bytea, bytea, timestamptz);
