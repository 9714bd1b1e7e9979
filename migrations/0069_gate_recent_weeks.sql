-- The submit gate reads only the recent weeks of submissions (docs/scale.md, "A submit
-- among many weeks").
--
-- 0010's gate counts the client's recent submissions and looks for its key-less repeat by
-- `received_at`, which is not what submissions are partitioned by (0067: ranges of `id`).
-- So every post planned and started a scan of every week's indexes, twice: at 58 weekly
-- partitions (a year of history) that alone was most of what the submit statement cost
-- PostgreSQL. Ids begin with the millisecond they were made, on the same clock as
-- `received_at`, so each lookup also keeps to ids made since eight days before its window
-- (a week, and a day for any clock's skew): PostgreSQL skips every other week when the
-- function starts the scan, and the result is the same.
-- 0067's bound of a week, as expressions PostgreSQL folds into the statement that uses them
-- (its aggregate made it a function PostgreSQL parsed and planned again in each transaction
-- that called it, a tenth of a millisecond for each of the gate's two bounds): the same text.
CREATE FUNCTION crockford_digit(value bigint, shift integer) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT substr('0123456789abcdefghjkmnpqrstvwxyz', ((value >> shift) & 31)::int + 1, 1)
$$;

CREATE FUNCTION submission_id_of_millis(millis bigint) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT 'sub_'
           || crockford_digit(millis, 45)
           || crockford_digit(millis, 40)
           || crockford_digit(millis, 35)
           || crockford_digit(millis, 30)
           || crockford_digit(millis, 25)
           || crockford_digit(millis, 20)
           || crockford_digit(millis, 15)
           || crockford_digit(millis, 10)
           || crockford_digit(millis, 5)
           || crockford_digit(millis, 0)
           || '0000000000000000'
$$;

CREATE OR REPLACE FUNCTION submission_id_bound(at timestamptz) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT submission_id_of_millis(
        floor(extract(epoch FROM at - timestamptz '1970-01-01 00:00:00+00') * 1000)::bigint)
$$;

CREATE OR REPLACE FUNCTION postbag_submit_gate(
    p_form_id text,
    p_client_hash bytea,
    p_rate_since timestamptz,
    p_rate_max integer,
    p_keyless boolean,
    p_payload_hash bytea,
    p_repeat_since timestamptz
) RETURNS TABLE (recent bigint, previous_id text, previous_hash bytea)
LANGUAGE plpgsql VOLATILE ROWS 1 AS $$
DECLARE
    -- Worked out once: the scans compare their partitions' bounds with plain values.
    rate_low text := submission_id_bound(p_rate_since - interval '8 days');
    repeat_low text := submission_id_bound(p_repeat_since - interval '8 days');
BEGIN
    PERFORM pg_advisory_xact_lock(
        hashtextextended('postbag.submit:' || p_form_id || ':' || encode(p_client_hash, 'hex'), 0));
    RETURN QUERY
        SELECT (SELECT count(*) FROM (
                    SELECT 1 FROM submissions c
                     WHERE c.form_id = p_form_id AND c.client_hash = p_client_hash
                       AND c.received_at > p_rate_since
                       AND c.id >= rate_low
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
                 AND s.id >= repeat_low
               LIMIT 1) p ON true;
END
$$;
