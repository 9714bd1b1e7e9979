-- organization_id in every primary key and unique key of a tenant table (docs/scale.md,
-- "Distributed PostgreSQL (Citus)"): a tenant-distributed PostgreSQL enforces a key only
-- within one shard, so each key must name the distribution column. Every rule holds as
-- before, since a form, a route, a submission, a stream… belongs to one organization:
-- (idempotency_key, form_id, organization_id) is unique exactly when (idempotency_key,
-- form_id) is, one delivery per (submission, route), one digest per (route, period), and
-- so on. Keys keep their names, so `ON CONFLICT ON CONSTRAINT` finds them before and after.
--
-- A table keyed by `id` becomes keyed by (id, organization_id): a lookup by id alone still
-- walks the key's index on its first column. Where a table also had UNIQUE (id,
-- organization_id) for the foreign keys of its children, that constraint goes (the new
-- primary key is the same index) and those foreign keys are added again on the new key.
-- The API key, stream key, invitation and SSO state hashes stay looked up by the hash
-- alone (the key's first column); they are hashes of random secrets, unique by
-- construction, and now unique per organization in the catalog.
--
-- Not changed, on purpose: `sso_domains` (a domain belongs to one organization across the
-- installation) and `organization_sso` are reference tables; `dashboard_sessions` holds a
-- member's current organization, which changes on a switch, so it is not distributed by it.
--
-- Locks and cost: every tenant table is locked ACCESS EXCLUSIVE until the migration commits
-- (the submit path, the API and the worker wait for it). Each rebuilt key is one index build
-- (a read and a sort of its table), and each foreign key added again is validated by one
-- join of the child table with its parent: on a large installation the time is a few
-- sequential reads of `deliveries`, `submissions` and the history tables (both partitioned
-- tables rebuild their key on every partition, `_legacy` included). Run it in a maintenance
-- window; nothing is rewritten and no row moves.

-- The foreign keys that reference a UNIQUE (id, organization_id) dropped below.
CREATE TEMPORARY TABLE rekeyed_references ON COMMIT DROP AS
SELECT f.conrelid::regclass::text AS child, f.conname, pg_get_constraintdef(f.oid) AS definition
  FROM pg_constraint f
  JOIN pg_constraint k ON k.conindid = f.conindid AND k.contype = 'u'
 WHERE f.contype = 'f' AND f.conparentid = 0 AND f.connamespace = 'public'::regnamespace
   AND k.conname LIKE '%\_id\_organization\_key';

-- The two foreign keys whose columns change.
ALTER TABLE deliveries DROP CONSTRAINT deliveries_destination_id_secret_version_fkey;
ALTER TABLE attachments DROP CONSTRAINT attachments_storage_key_fkey;

DO $$
DECLARE
    fk record;
    keyed text;
BEGIN
    FOR fk IN SELECT * FROM rekeyed_references LOOP
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', fk.child, fk.conname);
    END LOOP;
    FOREACH keyed IN ARRAY ARRAY[
        'alerts', 'api_keys', 'attachments', 'audit_log', 'deliveries', 'destinations',
        'digests', 'forms', 'hooks', 'invitations', 'notifications', 'replays', 'routes',
        'stream_events', 'stream_keys', 'stream_routes', 'streams', 'submissions'
    ] LOOP
        EXECUTE format('ALTER TABLE %I DROP CONSTRAINT %I, DROP CONSTRAINT IF EXISTS %I, '
                       'ADD CONSTRAINT %I PRIMARY KEY (id, organization_id)',
                       keyed, keyed || '_pkey', keyed || '_id_organization_key',
                       keyed || '_pkey');
    END LOOP;
END;
$$;

-- The partitioned history tables: the partition column stays in the key, after the tenant.
ALTER TABLE events DROP CONSTRAINT events_pkey,
    ADD CONSTRAINT events_pkey PRIMARY KEY (id, organization_id, created_at);
ALTER TABLE delivery_attempts DROP CONSTRAINT delivery_attempts_pkey,
    ADD CONSTRAINT delivery_attempts_pkey PRIMARY KEY (id, organization_id, started_at);

-- Keys on other columns: the same columns, then organization_id.
ALTER TABLE submissions DROP CONSTRAINT submissions_form_idempotency_key,
    ADD CONSTRAINT submissions_form_idempotency_key
        UNIQUE (idempotency_key, form_id, organization_id);
ALTER TABLE deliveries DROP CONSTRAINT deliveries_submission_route_key,
    ADD CONSTRAINT deliveries_submission_route_key
        UNIQUE (submission_id, route_id, organization_id);
ALTER TABLE digests DROP CONSTRAINT digests_route_period_key,
    ADD CONSTRAINT digests_route_period_key UNIQUE (route_id, period_key, organization_id);
ALTER TABLE stream_events DROP CONSTRAINT stream_events_client_id_key,
    DROP CONSTRAINT stream_events_idempotency_key,
    ADD CONSTRAINT stream_events_client_id_key UNIQUE (stream_id, client_id, organization_id),
    ADD CONSTRAINT stream_events_idempotency_key
        UNIQUE (stream_id, idempotency_key, organization_id);
ALTER TABLE api_keys DROP CONSTRAINT api_keys_key_hash_key,
    ADD CONSTRAINT api_keys_key_hash_key UNIQUE (key_hash, organization_id);
ALTER TABLE stream_keys DROP CONSTRAINT stream_keys_key_hash_key,
    ADD CONSTRAINT stream_keys_key_hash_key UNIQUE (key_hash, organization_id);
ALTER TABLE invitations DROP CONSTRAINT invitations_token_hash_key,
    ADD CONSTRAINT invitations_token_hash_key UNIQUE (token_hash, organization_id);
ALTER TABLE form_schemas DROP CONSTRAINT form_schemas_form_version_key,
    ADD CONSTRAINT form_schemas_form_version_key PRIMARY KEY (form_id, version, organization_id);
ALTER TABLE stream_schemas DROP CONSTRAINT stream_schemas_stream_version_key,
    ADD CONSTRAINT stream_schemas_stream_version_key
        PRIMARY KEY (stream_id, version, organization_id);
ALTER TABLE destination_secrets DROP CONSTRAINT destination_secrets_pkey,
    ADD CONSTRAINT destination_secrets_pkey PRIMARY KEY (destination_id, version, organization_id);
ALTER TABLE schema_drift DROP CONSTRAINT schema_drift_key,
    ADD CONSTRAINT schema_drift_key PRIMARY KEY (form_id, hour, path, keyword, organization_id);
ALTER TABLE schema_inference DROP CONSTRAINT schema_inference_pkey,
    ADD CONSTRAINT schema_inference_pkey PRIMARY KEY (form_id, organization_id);
ALTER TABLE spam_fingerprints DROP CONSTRAINT spam_fingerprints_key,
    ADD CONSTRAINT spam_fingerprints_key PRIMARY KEY (form_id, fingerprint, organization_id);
ALTER TABLE spam_training DROP CONSTRAINT spam_training_pkey,
    ADD CONSTRAINT spam_training_pkey PRIMARY KEY (submission_id, organization_id);
ALTER TABLE sso_attempts DROP CONSTRAINT sso_attempts_pkey,
    ADD CONSTRAINT sso_attempts_pkey PRIMARY KEY (state_hash, organization_id);
ALTER TABLE stored_objects DROP CONSTRAINT stored_objects_pkey,
    ADD CONSTRAINT stored_objects_pkey PRIMARY KEY (storage_key, organization_id);

-- Partial unique indexes: the same columns and predicate, then organization_id.
DROP INDEX routes_form_destination_key;
CREATE UNIQUE INDEX routes_form_destination_key ON routes (form_id, destination_id, organization_id)
    WHERE deleted_at IS NULL;
DROP INDEX stream_routes_stream_destination_key;
CREATE UNIQUE INDEX stream_routes_stream_destination_key
    ON stream_routes (stream_id, destination_id, organization_id) WHERE deleted_at IS NULL;
DROP INDEX hooks_destination_key;
CREATE UNIQUE INDEX hooks_destination_key ON hooks (destination_id, organization_id);
DROP INDEX deliveries_one_acknowledgement_idx;
CREATE UNIQUE INDEX deliveries_one_acknowledgement_idx ON deliveries (submission_id, organization_id)
    WHERE kind = 'acknowledgement';
DROP INDEX deliveries_one_autoresponse_idx;
CREATE UNIQUE INDEX deliveries_one_autoresponse_idx ON deliveries (submission_id, organization_id)
    WHERE kind = 'autoresponse';
DROP INDEX deliveries_digest_key;
CREATE UNIQUE INDEX deliveries_digest_key ON deliveries (digest_id, organization_id)
    WHERE digest_id IS NOT NULL;
DROP INDEX deliveries_event_route_key;
CREATE UNIQUE INDEX deliveries_event_route_key
    ON deliveries (event_id, stream_route_id, organization_id) WHERE event_id IS NOT NULL;

-- The foreign keys again, on the new keys.
DO $$
DECLARE
    fk record;
BEGIN
    FOR fk IN SELECT * FROM rekeyed_references LOOP
        EXECUTE format('ALTER TABLE %s ADD CONSTRAINT %I %s', fk.child, fk.conname, fk.definition);
    END LOOP;
END;
$$;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_destination_id_secret_version_fkey
    FOREIGN KEY (destination_id, secret_version, organization_id)
    REFERENCES destination_secrets (destination_id, version, organization_id);
ALTER TABLE attachments ADD CONSTRAINT attachments_storage_key_fkey
    FOREIGN KEY (storage_key, organization_id) REFERENCES stored_objects (storage_key, organization_id);
