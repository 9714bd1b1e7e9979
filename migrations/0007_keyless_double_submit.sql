-- The no-key double-submit check of the submit statement (`insert_submission`): take the
-- lock that serialises identical key-less submits of one client to one form (held to the
-- commit), then look for the submission such a submit made within the last 60 seconds.
-- A VOLATILE function takes a fresh snapshot for each statement it runs (READ COMMITTED),
-- so the lookup sees the row of a concurrent identical submit that committed while this
-- one waited for the lock, and the submit stays one statement: one round trip.
-- "No key" is written `coalesce(idempotency_key, '') = ''` (keys are never empty): as
-- `idempotency_key IS NULL` it could be planned on the idempotency constraint's index and
-- read every key-less submission of the form; this way it goes through
-- submissions_client_recent_idx (form, client, time).
CREATE FUNCTION postbag_previous_keyless_submission(
    p_lock_key bigint,
    p_form_id text,
    p_client_hash bytea,
    p_payload_hash bytea,
    p_now timestamptz
) RETURNS TABLE (id text, payload_hash bytea)
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(p_lock_key);
    RETURN QUERY
        SELECT s.id, s.payload_hash
          FROM submissions s
         WHERE s.form_id = p_form_id
           AND coalesce(s.idempotency_key, '') = ''
           AND s.client_hash = p_client_hash
           AND s.payload_hash = p_payload_hash
           AND s.received_at > p_now - interval '60 seconds';
END
$$;
