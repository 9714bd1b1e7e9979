-- Streams: keyed JSON events from servers (docs/streams.md), stored and fanned out through
-- the same outbox as submissions. A stream-event delivery copies nothing of its event: it
-- references the event row (`deliveries.event_id`) and the worker builds its body from
-- that row when it sends, so an erased event has nothing left to send anywhere.

CREATE TABLE streams (
    id              text PRIMARY KEY CHECK (id LIKE 'str\_%'),
    organization_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    name            text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    schema_mode     text NOT NULL DEFAULT 'off' CHECK (schema_mode IN ('off', 'observe', 'enforce')),
    retention_days  integer CHECK (retention_days BETWEEN 1 AND 3650),
    accepting       boolean NOT NULL DEFAULT true,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    deleted_at      timestamptz,
    CONSTRAINT streams_id_organization_key UNIQUE (id, organization_id)
);
CREATE INDEX streams_organization_idx ON streams (organization_id, id) WHERE deleted_at IS NULL;

-- Ingest keys: each posts events to one stream and does nothing else. Only a SHA-256 of
-- the key is kept, as for API keys.
CREATE TABLE stream_keys (
    id              text PRIMARY KEY CHECK (id LIKE 'sky\_%'),
    organization_id text NOT NULL,
    stream_id       text NOT NULL,
    name            text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    prefix          text NOT NULL,
    key_hash        bytea NOT NULL CONSTRAINT stream_keys_key_hash_key UNIQUE,
    created_at      timestamptz NOT NULL DEFAULT now(),
    revoked_at      timestamptz,
    FOREIGN KEY (stream_id, organization_id)
        REFERENCES streams (id, organization_id) ON DELETE CASCADE
);
CREATE INDEX stream_keys_stream_idx ON stream_keys (stream_id, id);

-- Schema versions, append-only like form_schemas: `(stream, version)` unique, never
-- updated. `event_type` null: the schema of every type without one of its own.
CREATE TABLE stream_schemas (
    organization_id text NOT NULL,
    stream_id       text NOT NULL,
    version         integer NOT NULL CHECK (version >= 1),
    event_type      text CHECK (length(event_type) BETWEEN 1 AND 200),
    schema          jsonb NOT NULL,
    source          text NOT NULL DEFAULT 'manual' CHECK (source IN ('manual', 'suggested')),
    created_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT stream_schemas_stream_version_key PRIMARY KEY (stream_id, version),
    FOREIGN KEY (stream_id, organization_id)
        REFERENCES streams (id, organization_id) ON DELETE CASCADE
);
CREATE TRIGGER stream_schemas_immutable BEFORE UPDATE ON stream_schemas
    FOR EACH ROW EXECUTE FUNCTION refuse_update();

CREATE TABLE stream_events (
    id              text PRIMARY KEY CHECK (id LIKE 'evt\_%'),
    organization_id text NOT NULL,
    stream_id       text NOT NULL,
    client_id       text CHECK (length(client_id) BETWEEN 1 AND 255),
    idempotency_key text CHECK (length(idempotency_key) BETWEEN 1 AND 255),
    type            text NOT NULL CHECK (length(type) BETWEEN 1 AND 200),
    status          text NOT NULL CHECK (status IN ('accepted', 'quarantined')),
    reason          text,
    schema_errors   jsonb,
    schema_version  integer,
    data            jsonb,
    payload_hash    bytea NOT NULL,
    occurred_at     timestamptz,
    received_at     timestamptz NOT NULL DEFAULT now(),
    erase_at        timestamptz,
    erased_at       timestamptz,
    erase_reason    text CHECK (erase_reason IN ('requested', 'expired')),
    CONSTRAINT stream_events_id_organization_key UNIQUE (id, organization_id),
    CONSTRAINT stream_events_client_id_key UNIQUE (stream_id, client_id),
    CONSTRAINT stream_events_idempotency_key UNIQUE (stream_id, idempotency_key),
    CONSTRAINT stream_events_reason_matches_status CHECK (
        (status = 'accepted' AND reason IS NULL)
        OR (status = 'quarantined' AND reason IS NOT NULL
            AND reason IN ('schema_violation', 'schema_unchecked', 'schema_error'))
    ),
    CONSTRAINT stream_events_erased_has_no_data CHECK (erased_at IS NULL OR data IS NULL),
    CONSTRAINT stream_events_kept_has_data CHECK (erased_at IS NOT NULL OR data IS NOT NULL),
    FOREIGN KEY (stream_id, organization_id)
        REFERENCES streams (id, organization_id) ON DELETE CASCADE
);
CREATE INDEX stream_events_stream_idx ON stream_events (stream_id, id DESC);
CREATE INDEX stream_events_erase_due_idx ON stream_events (erase_at) WHERE erased_at IS NULL;

CREATE TABLE stream_routes (
    id               text PRIMARY KEY CHECK (id LIKE 'srt\_%'),
    organization_id  text NOT NULL,
    stream_id        text NOT NULL,
    destination_id   text NOT NULL,
    enabled          boolean NOT NULL DEFAULT true,
    event_types      text[] CHECK (cardinality(event_types) BETWEEN 1 AND 100),
    include_statuses text[] NOT NULL DEFAULT '{accepted}'
                     CHECK (include_statuses <@ ARRAY['accepted', 'quarantined']
                            AND cardinality(include_statuses) >= 1),
    created_at       timestamptz NOT NULL DEFAULT now(),
    deleted_at       timestamptz,
    CONSTRAINT stream_routes_id_organization_key UNIQUE (id, organization_id),
    FOREIGN KEY (stream_id, organization_id)
        REFERENCES streams (id, organization_id) ON DELETE CASCADE,
    FOREIGN KEY (destination_id, organization_id)
        REFERENCES destinations (id, organization_id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX stream_routes_stream_destination_key ON stream_routes (stream_id, destination_id)
    WHERE deleted_at IS NULL;

-- An event's delivery references its event and its stream route, and holds no payload.
ALTER TABLE deliveries ADD COLUMN event_id text, ADD COLUMN stream_route_id text;
ALTER TABLE deliveries ALTER COLUMN payload DROP NOT NULL;
ALTER TABLE deliveries DROP CONSTRAINT deliveries_kind_check;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_kind_check
    CHECK (kind IN ('submission', 'acknowledgement', 'digest', 'event'));
ALTER TABLE deliveries ADD CONSTRAINT deliveries_event_references CHECK (
    (kind = 'event') = (event_id IS NOT NULL)
    AND (kind <> 'event' OR (stream_route_id IS NOT NULL AND destination_id IS NOT NULL
                             AND payload IS NULL))
);
ALTER TABLE deliveries DROP CONSTRAINT deliveries_kind_references;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_kind_references CHECK (
    (kind = 'submission' AND submission_id IS NOT NULL AND route_id IS NOT NULL
        AND destination_id IS NOT NULL)
    OR (kind = 'acknowledgement' AND submission_id IS NOT NULL AND route_id IS NULL)
    OR (kind = 'digest' AND digest_id IS NOT NULL AND route_id IS NOT NULL
        AND destination_id IS NOT NULL)
    OR (kind = 'event' AND submission_id IS NULL AND route_id IS NULL)
);
ALTER TABLE deliveries
    ADD CONSTRAINT deliveries_event_fkey FOREIGN KEY (event_id, organization_id)
        REFERENCES stream_events (id, organization_id) ON DELETE CASCADE,
    ADD CONSTRAINT deliveries_stream_route_fkey FOREIGN KEY (stream_route_id, organization_id)
        REFERENCES stream_routes (id, organization_id);
CREATE UNIQUE INDEX deliveries_event_route_key ON deliveries (event_id, stream_route_id)
    WHERE event_id IS NOT NULL;

-- Events are counted per month apart from submissions, on the same shards.
ALTER TABLE usage_counters ADD COLUMN events integer NOT NULL DEFAULT 0 CHECK (events >= 0);

DO $$
DECLARE
    tenant_table text;
BEGIN
    FOREACH tenant_table IN ARRAY ARRAY['streams', 'stream_keys', 'stream_schemas',
                                        'stream_events', 'stream_routes']
    LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', tenant_table);
        EXECUTE format(
            'CREATE POLICY %I ON %I USING (organization_id = '
            'current_setting(''postbag.organization_id'', true)) WITH CHECK (organization_id = '
            'current_setting(''postbag.organization_id'', true))',
            tenant_table || '_organization_scope', tenant_table);
        EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %I TO postbag_app', tenant_table);
    END LOOP;
END;
$$;
