-- The idempotency constraint's index led with form_id, so the planner could pick it for
-- "this form's recent submissions from this client" (the rate limit) with form_id as its
-- only condition and walk every submission of the form: seen while a young table had no
-- statistics yet, the cost of a submit growing with the form's history. Leading with the
-- key keeps the keyed lookup exact and leaves that one to submissions_client_recent_idx.
-- Same name, same columns: `ON CONFLICT (form_id, idempotency_key)` of running code still
-- finds it.
ALTER TABLE submissions
    DROP CONSTRAINT submissions_form_idempotency_key,
    ADD CONSTRAINT submissions_form_idempotency_key UNIQUE (idempotency_key, form_id);
