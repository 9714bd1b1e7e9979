-- The whole Postbag data model. Every invariant a database can hold is held here:
-- uniqueness, allowed statuses, organization consistency between parent and child
-- (composite foreign keys on (id, organization_id)), and immutability of schema versions
-- and secret versions.

CREATE TABLE organizations (
    id          text PRIMARY KEY CHECK (id LIKE 'org\_%'),
    name        text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    plan        text NOT NULL DEFAULT 'free'
                CHECK (plan IN ('free', 'pro', 'team', 'self_hosted')),
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE api_keys (
    id              text PRIMARY KEY CHECK (id LIKE 'key\_%'),
    organization_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    name            text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    prefix          text NOT NULL,
    key_hash        bytea NOT NULL CONSTRAINT api_keys_key_hash_key UNIQUE,
    created_at      timestamptz NOT NULL DEFAULT now(),
    last_used_at    timestamptz,
    revoked_at      timestamptz
);
CREATE INDEX api_keys_organization_idx ON api_keys (organization_id, id);

CREATE TABLE forms (
    id                      text PRIMARY KEY CHECK (id LIKE 'frm\_%'),
    organization_id         text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    name                    text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    accepting               boolean NOT NULL DEFAULT true,
    allowed_origins         text[] NOT NULL DEFAULT '{}',
    honeypot_field          text NOT NULL DEFAULT '_gotcha',
    redirect_url            text,
    retention_days          integer CHECK (retention_days BETWEEN 1 AND 3650),
    rate_limit_max          integer NOT NULL DEFAULT 10 CHECK (rate_limit_max >= 1),
    rate_limit_per_seconds  integer NOT NULL DEFAULT 600 CHECK (rate_limit_per_seconds >= 1),
    schema_mode             text NOT NULL DEFAULT 'off'
                            CHECK (schema_mode IN ('off', 'observe', 'enforce')),
    labels                  jsonb NOT NULL DEFAULT '{}',
    file_fields             jsonb NOT NULL DEFAULT '{}',
    consent_field           text,
    ack_email               jsonb,
    turnstile_secret        text,
    created_at              timestamptz NOT NULL DEFAULT now(),
    updated_at              timestamptz NOT NULL DEFAULT now(),
    deleted_at              timestamptz,
    CONSTRAINT forms_id_organization_key UNIQUE (id, organization_id)
);
CREATE INDEX forms_organization_idx ON forms (organization_id, id) WHERE deleted_at IS NULL;

CREATE TABLE form_schemas (
    organization_id text NOT NULL,
    form_id         text NOT NULL,
    version         integer NOT NULL CHECK (version >= 1),
    schema          jsonb NOT NULL,
    source          text NOT NULL DEFAULT 'manual' CHECK (source IN ('manual', 'inferred')),
    created_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT form_schemas_form_version_key PRIMARY KEY (form_id, version),
    FOREIGN KEY (form_id, organization_id) REFERENCES forms (id, organization_id) ON DELETE CASCADE
);

CREATE FUNCTION refuse_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% rows are immutable', TG_TABLE_NAME USING ERRCODE = 'raise_exception';
END;
$$;

CREATE TRIGGER form_schemas_immutable BEFORE UPDATE ON form_schemas
    FOR EACH ROW EXECUTE FUNCTION refuse_update();

CREATE TABLE destinations (
    id                   text PRIMARY KEY CHECK (id LIKE 'dst\_%'),
    organization_id      text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    type                 text NOT NULL CHECK (type IN ('webhook', 'email', 'telegram')),
    name                 text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    config               jsonb NOT NULL,
    enabled              boolean NOT NULL DEFAULT true,
    health               text NOT NULL DEFAULT 'healthy' CHECK (health IN ('healthy', 'failing')),
    consecutive_failures integer NOT NULL DEFAULT 0 CHECK (consecutive_failures >= 0),
    probe_after          timestamptz,
    health_stats         jsonb,
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    deleted_at           timestamptz,
    CONSTRAINT destinations_id_organization_key UNIQUE (id, organization_id)
);
CREATE INDEX destinations_organization_idx ON destinations (organization_id, id)
    WHERE deleted_at IS NULL;

-- A secret is never edited: rotation appends a version, and a delivery keeps the
-- version that was current when its submission was accepted.
CREATE TABLE destination_secrets (
    organization_id text NOT NULL,
    destination_id  text NOT NULL,
    version         integer NOT NULL CHECK (version >= 1),
    secret          text NOT NULL CHECK (length(secret) BETWEEN 1 AND 4096),
    created_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT destination_secrets_pkey PRIMARY KEY (destination_id, version),
    FOREIGN KEY (destination_id, organization_id)
        REFERENCES destinations (id, organization_id) ON DELETE CASCADE
);

CREATE TRIGGER destination_secrets_immutable BEFORE UPDATE ON destination_secrets
    FOR EACH ROW EXECUTE FUNCTION refuse_update();

CREATE TABLE routes (
    id               text PRIMARY KEY CHECK (id LIKE 'rte\_%'),
    organization_id  text NOT NULL,
    form_id          text NOT NULL,
    destination_id   text NOT NULL,
    enabled          boolean NOT NULL DEFAULT true,
    include_statuses text[] NOT NULL DEFAULT '{accepted}'
                     CHECK (include_statuses <@ ARRAY['accepted', 'spam', 'quarantined']
                            AND cardinality(include_statuses) >= 1),
    mode             text NOT NULL DEFAULT 'immediate' CHECK (mode IN ('immediate', 'digest')),
    period           text CHECK (period IN ('hourly', 'daily', 'weekly')),
    template         jsonb,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    -- Routes are removed softly: their deliveries keep pointing at them.
    deleted_at       timestamptz,
    CONSTRAINT routes_id_organization_key UNIQUE (id, organization_id),
    CONSTRAINT routes_period_matches_mode CHECK ((mode = 'digest') = (period IS NOT NULL)),
    FOREIGN KEY (form_id, organization_id) REFERENCES forms (id, organization_id) ON DELETE CASCADE,
    FOREIGN KEY (destination_id, organization_id)
        REFERENCES destinations (id, organization_id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX routes_form_destination_key ON routes (form_id, destination_id)
    WHERE deleted_at IS NULL;

CREATE TABLE submissions (
    id              text PRIMARY KEY CHECK (id LIKE 'sub\_%'),
    organization_id text NOT NULL,
    form_id         text NOT NULL,
    status          text NOT NULL CHECK (status IN ('accepted', 'spam', 'quarantined')),
    reason          text,
    flags           text[] NOT NULL DEFAULT '{}'
                    CHECK (flags <@ ARRAY['test', 'over_quota']),
    "values"        jsonb,
    meta            jsonb NOT NULL DEFAULT '{}',
    idempotency_key text,
    payload_hash    bytea NOT NULL,
    client_hash     bytea,
    schema_version  integer,
    received_at     timestamptz NOT NULL DEFAULT now(),
    erase_at        timestamptz,
    erased_at       timestamptz,
    erase_reason    text CHECK (erase_reason IN ('requested', 'expired')),
    CONSTRAINT submissions_id_organization_key UNIQUE (id, organization_id),
    CONSTRAINT submissions_form_idempotency_key UNIQUE (form_id, idempotency_key),
    CONSTRAINT submissions_reason_matches_status CHECK (
        (status = 'accepted' AND reason IS NULL)
        OR (status = 'spam' AND reason IS NOT DISTINCT FROM 'honeypot')
        OR (status = 'quarantined' AND reason IS NOT NULL AND reason IN ('origin_rejected', 'rate_limited',
            'turnstile_failed', 'turnstile_unavailable', 'schema_violation'))
    ),
    CONSTRAINT submissions_erased_has_no_values CHECK (erased_at IS NULL OR "values" IS NULL),
    CONSTRAINT submissions_erase_after_arrival CHECK (erase_at IS NULL OR erase_at >= received_at),
    FOREIGN KEY (form_id, organization_id) REFERENCES forms (id, organization_id) ON DELETE CASCADE
);
CREATE INDEX submissions_form_received_idx ON submissions (form_id, received_at DESC, id DESC);
CREATE INDEX submissions_organization_received_idx
    ON submissions (organization_id, received_at DESC, id DESC);
CREATE INDEX submissions_client_recent_idx ON submissions (form_id, client_hash, received_at);
CREATE INDEX submissions_erase_due_idx ON submissions (erase_at) WHERE erased_at IS NULL;

-- Every object written to storage is recorded here before its bytes are written, so
-- objects of a submit whose transaction failed (orphans) and deletions that failed can be
-- found and retried.
CREATE TABLE stored_objects (
    storage_key     text PRIMARY KEY,
    organization_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    submission_id   text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    delete_after    timestamptz,
    delete_attempts integer NOT NULL DEFAULT 0 CHECK (delete_attempts >= 0),
    last_error      text,
    deleted_at      timestamptz
);
CREATE INDEX stored_objects_pending_delete_idx ON stored_objects (delete_after)
    WHERE deleted_at IS NULL AND delete_after IS NOT NULL;
CREATE INDEX stored_objects_submission_idx ON stored_objects (submission_id);

CREATE TABLE attachments (
    id              text PRIMARY KEY CHECK (id LIKE 'att\_%'),
    organization_id text NOT NULL,
    submission_id   text NOT NULL,
    field           text NOT NULL,
    name            text NOT NULL,
    content_type    text NOT NULL,
    size            bigint NOT NULL CHECK (size > 0 AND size <= 5242880),
    sha256          bytea NOT NULL,
    storage_key     text NOT NULL REFERENCES stored_objects (storage_key),
    created_at      timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (submission_id, organization_id)
        REFERENCES submissions (id, organization_id) ON DELETE CASCADE
);
CREATE INDEX attachments_submission_idx ON attachments (submission_id);

CREATE TABLE digests (
    id               text PRIMARY KEY CHECK (id LIKE 'dgs\_%'),
    organization_id  text NOT NULL,
    route_id         text NOT NULL,
    period_key       text NOT NULL,
    period_start     timestamptz NOT NULL,
    period_end       timestamptz NOT NULL CHECK (period_end > period_start),
    submission_count integer NOT NULL CHECK (submission_count >= 0),
    created_at       timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT digests_id_organization_key UNIQUE (id, organization_id),
    CONSTRAINT digests_route_period_key UNIQUE (route_id, period_key),
    FOREIGN KEY (route_id, organization_id) REFERENCES routes (id, organization_id) ON DELETE CASCADE
);

CREATE TABLE deliveries (
    id              text PRIMARY KEY CHECK (id LIKE 'dlv\_%'),
    organization_id text NOT NULL,
    kind            text NOT NULL DEFAULT 'submission'
                    CHECK (kind IN ('submission', 'acknowledgement', 'digest')),
    submission_id   text,
    route_id        text,
    digest_id       text,
    destination_id  text,
    channel         text NOT NULL CHECK (channel IN ('webhook', 'email', 'telegram')),
    status          text NOT NULL DEFAULT 'pending'
                    CHECK (status IN ('pending', 'sending', 'sent', 'failed', 'dead', 'skipped')),
    reason          text,
    held            boolean NOT NULL DEFAULT false,
    attempts        integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    max_attempts    integer NOT NULL CHECK (max_attempts >= 1),
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    claimed_until   timestamptz,
    claim_token     uuid,
    payload         jsonb NOT NULL,
    target          jsonb NOT NULL,
    template        jsonb,
    secret_version  integer,
    last_detail     text,
    sent_at         timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT deliveries_id_organization_key UNIQUE (id, organization_id),
    CONSTRAINT deliveries_submission_route_key UNIQUE (submission_id, route_id),
    CONSTRAINT deliveries_digest_key UNIQUE (digest_id),
    CONSTRAINT deliveries_kind_references CHECK (
        (kind = 'submission' AND submission_id IS NOT NULL AND route_id IS NOT NULL
            AND destination_id IS NOT NULL)
        OR (kind = 'acknowledgement' AND submission_id IS NOT NULL AND route_id IS NULL)
        OR (kind = 'digest' AND digest_id IS NOT NULL AND route_id IS NOT NULL
            AND destination_id IS NOT NULL)
    ),
    CONSTRAINT deliveries_sending_has_lease CHECK (
        status <> 'sending' OR (claim_token IS NOT NULL AND claimed_until IS NOT NULL)
    ),
    CONSTRAINT deliveries_ended_has_reason CHECK (
        status NOT IN ('dead', 'skipped') OR reason IS NOT NULL
    ),
    FOREIGN KEY (submission_id, organization_id)
        REFERENCES submissions (id, organization_id) ON DELETE CASCADE,
    FOREIGN KEY (route_id, organization_id) REFERENCES routes (id, organization_id),
    FOREIGN KEY (digest_id, organization_id) REFERENCES digests (id, organization_id),
    FOREIGN KEY (destination_id, organization_id) REFERENCES destinations (id, organization_id),
    FOREIGN KEY (destination_id, secret_version)
        REFERENCES destination_secrets (destination_id, version)
);
CREATE UNIQUE INDEX deliveries_one_acknowledgement_idx ON deliveries (submission_id)
    WHERE kind = 'acknowledgement';
-- The claim query's hot paths: due rows, and sending rows whose lease may have expired.
CREATE INDEX deliveries_due_idx ON deliveries (next_attempt_at)
    WHERE status IN ('pending', 'failed') AND NOT held;
CREATE INDEX deliveries_lease_idx ON deliveries (claimed_until) WHERE status = 'sending';
CREATE INDEX deliveries_submission_idx ON deliveries (submission_id);
CREATE INDEX deliveries_organization_idx ON deliveries (organization_id, id DESC);
CREATE INDEX deliveries_destination_idx ON deliveries (destination_id, status);
CREATE INDEX deliveries_held_idx ON deliveries (organization_id) WHERE held;

CREATE TABLE delivery_attempts (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    organization_id  text NOT NULL,
    delivery_id      text NOT NULL,
    attempt          integer NOT NULL CHECK (attempt >= 1),
    claim_token      uuid NOT NULL,
    started_at       timestamptz NOT NULL,
    duration_ms      integer NOT NULL CHECK (duration_ms >= 0),
    outcome          text NOT NULL CHECK (outcome IN ('sent', 'failed', 'dead', 'fenced')),
    http_status      integer,
    error_class      text,
    response_excerpt text CHECK (length(response_excerpt) <= 512),
    FOREIGN KEY (delivery_id, organization_id)
        REFERENCES deliveries (id, organization_id) ON DELETE CASCADE
);
CREATE INDEX delivery_attempts_delivery_idx ON delivery_attempts (delivery_id, id);
CREATE INDEX delivery_attempts_started_idx ON delivery_attempts (started_at);

CREATE TABLE events (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    organization_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    type            text NOT NULL CHECK (type ~ '^[a-z_]+\.[a-z_]+$'),
    subject_id      text,
    data            jsonb NOT NULL DEFAULT '{}',
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX events_organization_idx ON events (organization_id, id);

CREATE TABLE alerts (
    id              text PRIMARY KEY CHECK (id LIKE 'alr\_%'),
    organization_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    kind            text NOT NULL CHECK (kind IN ('delivery.dead', 'storage.stuck')),
    subject_id      text NOT NULL,
    status          text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'acknowledged')),
    occurrences     integer NOT NULL DEFAULT 1 CHECK (occurrences >= 1),
    detail          text,
    last_delivery_id text,
    first_at        timestamptz NOT NULL DEFAULT now(),
    last_at         timestamptz NOT NULL DEFAULT now(),
    acknowledged_at timestamptz,
    CONSTRAINT alerts_acknowledged_has_time CHECK (
        (status = 'acknowledged') = (acknowledged_at IS NOT NULL)
    )
);
-- One open alert per subject (a destination, or a form for acknowledgement emails):
-- a storm of dead deliveries counts occurrences on one row.
CREATE UNIQUE INDEX alerts_one_open_idx ON alerts (organization_id, kind, subject_id)
    WHERE status = 'open';

CREATE TABLE usage_counters (
    organization_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    month           date NOT NULL CHECK (extract(day FROM month) = 1),
    submissions     integer NOT NULL DEFAULT 0 CHECK (submissions >= 0),
    CONSTRAINT usage_counters_pkey PRIMARY KEY (organization_id, month)
);

-- Not a tenant table: one row per worker, written on every pass, read by /health.
CREATE TABLE worker_heartbeats (
    worker_id     text PRIMARY KEY,
    tick          text NOT NULL CHECK (tick IN ('deliver', 'digest', 'retention')),
    last_beat_at  timestamptz NOT NULL DEFAULT now(),
    last_pass     jsonb NOT NULL DEFAULT '{}'
);
