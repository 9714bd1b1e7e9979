-- name: insert_form
-- Create a form; the turnstile secret goes in but is never read back by the API.
INSERT INTO forms (id, organization_id, name, accepting, allowed_origins, honeypot_field,
                   redirect_url, retention_days, rate_limit_max, rate_limit_per_seconds,
                   schema_mode, labels, file_fields, consent_field, ack_email, autoresponse, spam,
                   turnstile_secret, spam_secrets)
VALUES (%(id)s, %(organization_id)s, %(name)s, %(accepting)s, %(allowed_origins)s,
        %(honeypot_field)s, %(redirect_url)s, %(retention_days)s, %(rate_limit_max)s,
        %(rate_limit_per_seconds)s, %(schema_mode)s, %(labels)s, %(file_fields)s,
        %(consent_field)s, %(ack_email)s, %(autoresponse)s, %(spam)s, %(turnstile_secret)s,
        jsonb_strip_nulls(%(spam_secrets)s))
RETURNING id

-- name: get_form
-- One live form as the API shows it (whether Turnstile is on, never its secret).
SELECT id, name, accepting, allowed_origins, honeypot_field, redirect_url, retention_days,
       rate_limit_max, rate_limit_per_seconds, schema_mode, labels, file_fields,
       consent_field, ack_email, autoresponse, spam,
       turnstile_secret IS NOT NULL AS turnstile_enabled,
       jsonb_build_object('hcaptcha', spam_secrets ? 'hcaptcha_secret',
                          'recaptcha', spam_secrets ? 'recaptcha_secret',
                          'akismet', spam_secrets ? 'akismet_key') AS spam_checks,
       created_at, updated_at
  FROM forms
 WHERE id = %(id)s AND organization_id = %(organization_id)s AND deleted_at IS NULL

-- name: lock_form
-- Lock one live form's row for an update (the form as the API shows it).
SELECT id, name, accepting, allowed_origins, honeypot_field, redirect_url, retention_days,
       rate_limit_max, rate_limit_per_seconds, schema_mode, labels, file_fields,
       consent_field, ack_email, autoresponse, spam,
       turnstile_secret IS NOT NULL AS turnstile_enabled,
       jsonb_build_object('hcaptcha', spam_secrets ? 'hcaptcha_secret',
                          'recaptcha', spam_secrets ? 'recaptcha_secret',
                          'akismet', spam_secrets ? 'akismet_key') AS spam_checks,
       created_at, updated_at
  FROM forms
 WHERE id = %(id)s AND organization_id = %(organization_id)s AND deleted_at IS NULL
   FOR UPDATE

-- name: list_forms
-- One page of the organization's live forms, by id, after a cursor.
SELECT id, name, accepting, allowed_origins, honeypot_field, redirect_url, retention_days,
       rate_limit_max, rate_limit_per_seconds, schema_mode, labels, file_fields,
       consent_field, ack_email, autoresponse, spam,
       turnstile_secret IS NOT NULL AS turnstile_enabled,
       jsonb_build_object('hcaptcha', spam_secrets ? 'hcaptcha_secret',
                          'recaptcha', spam_secrets ? 'recaptcha_secret',
                          'akismet', spam_secrets ? 'akismet_key') AS spam_checks,
       created_at, updated_at
  FROM forms
 WHERE organization_id = %(organization_id)s
   AND deleted_at IS NULL
   AND (%(after)s::text IS NULL OR id > %(after)s)
 ORDER BY id
 LIMIT %(limit)s

-- name: update_form
-- Write a live form's settings; the turnstile secret changes only when asked to.
UPDATE forms
   SET name = %(name)s, accepting = %(accepting)s, allowed_origins = %(allowed_origins)s,
       honeypot_field = %(honeypot_field)s, redirect_url = %(redirect_url)s,
       retention_days = %(retention_days)s, rate_limit_max = %(rate_limit_max)s,
       rate_limit_per_seconds = %(rate_limit_per_seconds)s, schema_mode = %(schema_mode)s,
       labels = %(labels)s, file_fields = %(file_fields)s, consent_field = %(consent_field)s,
       ack_email = %(ack_email)s, autoresponse = %(autoresponse)s, spam = %(spam)s,
       turnstile_secret = CASE WHEN %(set_turnstile)s THEN %(turnstile_secret)s
                               ELSE turnstile_secret END,
       spam_secrets = CASE WHEN %(clear_spam_secrets)s THEN '{}'::jsonb
                           WHEN %(set_spam_secrets)s
                           THEN jsonb_strip_nulls(spam_secrets || %(spam_secrets)s)
                           ELSE spam_secrets END,
       updated_at = now()
 WHERE id = %(id)s AND organization_id = %(organization_id)s AND deleted_at IS NULL
RETURNING id

-- name: delete_form
-- Remove a live form softly; returns nothing when there is no such live form.
UPDATE forms SET deleted_at = now(), updated_at = now()
 WHERE id = %(id)s AND organization_id = %(organization_id)s AND deleted_at IS NULL
RETURNING id

-- name: delete_form_routes
-- Remove the live routes of a form softly (the form is being deleted).
UPDATE routes SET deleted_at = now(), updated_at = now()
 WHERE form_id = %(form_id)s AND organization_id = %(organization_id)s AND deleted_at IS NULL

-- name: lock_form_plan
-- Lock a live form's row (schema versions are appended one at a time under it), with its
-- organization's plan.
SELECT f.id, o.plan
  FROM forms f JOIN organizations o ON o.id = f.organization_id
 WHERE f.id = %(id)s AND f.organization_id = %(organization_id)s AND f.deleted_at IS NULL
   FOR UPDATE OF f

-- name: count_form_schemas
-- How many schema versions a form has.
SELECT count(*) AS n FROM form_schemas
 WHERE form_id = %(form_id)s AND organization_id = %(organization_id)s

-- name: insert_form_schema
-- Append the next schema version of a form (the caller holds the form's row lock).
INSERT INTO form_schemas (organization_id, form_id, version, schema, source)
SELECT %(organization_id)s, %(form_id)s, coalesce(max(version), 0) + 1, %(schema)s, %(source)s
  FROM form_schemas
 WHERE form_id = %(form_id)s AND organization_id = %(organization_id)s
RETURNING version, schema, source, created_at

-- name: get_form_schema
-- One schema version of a form.
SELECT version, schema, source, created_at
  FROM form_schemas
 WHERE form_id = %(form_id)s AND organization_id = %(organization_id)s
   AND version = %(version)s

-- name: recent_form_schemas
-- A form's latest `limit` versions, newest first, with the current one (its latest
-- `manual` version) even when older, each with the form's number of versions (versions
-- are numbered 1..n without gaps).
SELECT version, schema, source, created_at,
       (SELECT count(*) FROM form_schemas c
         WHERE c.form_id = %(form_id)s AND c.organization_id = %(organization_id)s) AS total
  FROM form_schemas
 WHERE form_id = %(form_id)s AND organization_id = %(organization_id)s
   AND (version > (SELECT coalesce(max(m.version), 0) FROM form_schemas m
                    WHERE m.form_id = %(form_id)s
                      AND m.organization_id = %(organization_id)s) - %(limit)s
        OR version = (SELECT max(m.version) FROM form_schemas m
                       WHERE m.form_id = %(form_id)s
                         AND m.organization_id = %(organization_id)s
                         AND m.source = 'manual'))
 ORDER BY version DESC

-- name: form_drift
-- A form's schema drift since `since`: one row per value path and keyword, with its count
-- and when it was first and last seen, the latest first.
SELECT path, keyword, sum(count)::bigint AS count, min(first_seen) AS first_seen,
       max(last_seen) AS last_seen
  FROM schema_drift
 WHERE form_id = %(form_id)s AND organization_id = %(organization_id)s
   AND hour >= date_trunc('hour', %(since)s::timestamptz, 'UTC')
 GROUP BY path, keyword
 ORDER BY max(last_seen) DESC, path, keyword
 LIMIT %(limit)s

-- name: list_form_schemas
-- One page of a form's schema versions, oldest first, after a cursor.
SELECT version, schema, source, created_at
  FROM form_schemas
 WHERE form_id = %(form_id)s
   AND organization_id = %(organization_id)s
   AND (%(after)s::integer IS NULL OR version > %(after)s)
 ORDER BY version
 LIMIT %(limit)s

-- name: oldest_form
-- The oldest live form of the installation (the local runner's start page shows it).
SELECT id, name, accepting, allowed_origins, honeypot_field, redirect_url, retention_days,
       rate_limit_max, rate_limit_per_seconds, schema_mode, labels, file_fields,
       consent_field, ack_email, autoresponse, spam,
       turnstile_secret IS NOT NULL AS turnstile_enabled,
       jsonb_build_object('hcaptcha', spam_secrets ? 'hcaptcha_secret',
                          'recaptcha', spam_secrets ? 'recaptcha_secret',
                          'akismet', spam_secrets ? 'akismet_key') AS spam_checks,
       created_at, updated_at
  FROM forms
 WHERE deleted_at IS NULL
 ORDER BY created_at, id
 LIMIT 1
