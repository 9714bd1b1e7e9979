-- History in weekly partitions (docs/scale.md): `events` by `created_at` and
-- `delivery_attempts` by `started_at`. A week whose every row is past the history period
-- leaves by DROP, not by a DELETE proportional to its rows.
--
-- Nothing moves at upgrade: each table becomes its own `_legacy` partition, covering
-- everything before the next Monday (00:00 UTC), and keeps being pruned in batches until it
-- ages out. Weekly partitions start at that Monday; the `_default` partition catches a row
-- no week holds yet (a late retention tick), so an insert never fails for want of one, and
-- the week created later takes those rows over.

CREATE TABLE history_partitions (
    name        text PRIMARY KEY,
    parent      text NOT NULL CHECK (parent IN ('events', 'delivery_attempts')),
    range_start timestamptz NOT NULL,
    range_end   timestamptz NOT NULL CHECK (range_end > range_start)
);
COMMENT ON TABLE history_partitions IS
    'The dated partitions of the history tables (not the default one), for the retention tick.';

CREATE FUNCTION history_column(parent text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE parent WHEN 'events' THEN 'created_at' WHEN 'delivery_attempts' THEN 'started_at' END
$$;

-- Scope every partition as its parent is scoped (the application role reads through the
-- parent and holds no grant on a partition; this is the second fence).
CREATE FUNCTION history_scope(partition text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', partition);
    EXECUTE format(
        'CREATE POLICY %I ON %I USING (organization_id = '
        'current_setting(''postbag.organization_id'', true)) WITH CHECK (organization_id = '
        'current_setting(''postbag.organization_id'', true))',
        partition || '_organization_scope', partition);
END;
$$;

-- The week starting at `week_start` (a Monday, 00:00 UTC) as a partition of `parent`, unless
-- a partition already covers it; rows the default partition caught for that week move in.
-- True when it was created.
CREATE FUNCTION history_week_add(parent text, week_start timestamptz) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    week_end timestamptz := week_start + interval '7 days';
    partition text := parent || '_' || to_char(week_start AT TIME ZONE 'UTC', 'YYYYMMDD');
    bound text := history_column(parent);
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('history_partitions'));
    IF EXISTS (SELECT 1 FROM history_partitions p
                WHERE p.parent = history_week_add.parent
                  AND p.range_start < week_end AND p.range_end > week_start) THEN
        RETURN false;
    END IF;
    EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS)',
                   partition, parent);
    EXECUTE format('WITH moved AS (DELETE FROM %I WHERE %I >= $1 AND %I < $2 RETURNING *) '
                   'INSERT INTO %I SELECT * FROM moved',
                   parent || '_default', bound, bound, partition)
        USING week_start, week_end;
    EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)',
                   parent, partition, week_start, week_end);
    PERFORM history_scope(partition);
    INSERT INTO history_partitions VALUES (partition, parent, week_start, week_end);
    RETURN true;
END;
$$;

-- Detach and drop one dated partition (the caller sets a lock timeout: the detach waits for
-- no reader longer than that, and the next tick tries again).
CREATE FUNCTION history_partition_drop(partition text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    owner text;
BEGIN
    SELECT parent INTO owner FROM history_partitions WHERE name = partition;
    IF owner IS NULL THEN
        RETURN;
    END IF;
    EXECUTE format('ALTER TABLE %I DETACH PARTITION %I', owner, partition);
    EXECUTE format('DROP TABLE %I', partition);
    DELETE FROM history_partitions WHERE name = partition;
END;
$$;

-- Up to `batch` rows older than `before` deleted from the partitions no week holds (the
-- legacy one, until it ages out, and the default one); the number deleted.
CREATE FUNCTION history_prune_leftovers(parent text, before timestamptz, batch integer)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    deleted integer := 0;
    n integer;
    leftover text;
BEGIN
    FOREACH leftover IN ARRAY ARRAY[parent || '_legacy', parent || '_default'] LOOP
        CONTINUE WHEN to_regclass(leftover) IS NULL OR deleted >= batch;
        EXECUTE format('DELETE FROM %I WHERE id IN (SELECT id FROM %I WHERE %I < $1 '
                       'ORDER BY %I LIMIT $2 FOR UPDATE SKIP LOCKED)',
                       leftover, leftover, history_column(parent), history_column(parent))
            USING before, batch - deleted;
        GET DIAGNOSTICS n = ROW_COUNT;
        deleted := deleted + n;
    END LOOP;
    RETURN deleted;
END;
$$;

-- events
ALTER TABLE events RENAME TO events_legacy;
ALTER TABLE events_legacy DROP CONSTRAINT events_pkey;
ALTER TABLE events_legacy ALTER COLUMN id DROP IDENTITY;
ALTER INDEX events_organization_idx RENAME TO events_legacy_organization_idx;
ALTER INDEX events_created_idx RENAME TO events_legacy_created_idx;
ALTER INDEX events_subject_idx RENAME TO events_legacy_subject_idx;
ALTER POLICY events_organization_scope ON events_legacy RENAME TO events_legacy_organization_scope;
CREATE TABLE events (
    id              bigint GENERATED ALWAYS AS IDENTITY,
    organization_id text NOT NULL
        CONSTRAINT events_organization_id_fkey REFERENCES organizations (id) ON DELETE CASCADE,
    type            text NOT NULL CONSTRAINT events_type_check CHECK (type ~ '^[a-z_]+\.[a-z_]+$'),
    subject_id      text,
    data            jsonb NOT NULL DEFAULT '{}',
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (id, created_at)
) PARTITION BY RANGE (created_at);
CREATE INDEX events_organization_idx ON events (organization_id, id);
CREATE INDEX events_created_idx ON events (created_at);
CREATE INDEX events_subject_idx ON events (subject_id);

-- delivery_attempts
ALTER TABLE delivery_attempts RENAME TO delivery_attempts_legacy;
ALTER TABLE delivery_attempts_legacy DROP CONSTRAINT delivery_attempts_pkey;
ALTER TABLE delivery_attempts_legacy ALTER COLUMN id DROP IDENTITY;
ALTER INDEX delivery_attempts_delivery_idx RENAME TO delivery_attempts_legacy_delivery_idx;
ALTER INDEX delivery_attempts_started_idx RENAME TO delivery_attempts_legacy_started_idx;
ALTER POLICY delivery_attempts_organization_scope ON delivery_attempts_legacy
    RENAME TO delivery_attempts_legacy_organization_scope;
CREATE TABLE delivery_attempts (
    id               bigint GENERATED ALWAYS AS IDENTITY,
    organization_id  text NOT NULL,
    delivery_id      text NOT NULL,
    attempt          integer NOT NULL CONSTRAINT delivery_attempts_attempt_check CHECK (attempt >= 1),
    claim_token      uuid NOT NULL,
    started_at       timestamptz NOT NULL,
    duration_ms      integer NOT NULL CONSTRAINT delivery_attempts_duration_ms_check CHECK (duration_ms >= 0),
    outcome          text NOT NULL CONSTRAINT delivery_attempts_outcome_check
        CHECK (outcome IN ('sent', 'failed', 'dead', 'fenced')),
    http_status      integer,
    error_class      text,
    response_excerpt text CONSTRAINT delivery_attempts_response_excerpt_check
        CHECK (length(response_excerpt) <= 512),
    PRIMARY KEY (id, started_at),
    CONSTRAINT delivery_attempts_delivery_id_organization_id_fkey
        FOREIGN KEY (delivery_id, organization_id)
        REFERENCES deliveries (id, organization_id) ON DELETE CASCADE
) PARTITION BY RANGE (started_at);
CREATE INDEX delivery_attempts_delivery_idx ON delivery_attempts (delivery_id, id);
CREATE INDEX delivery_attempts_started_idx ON delivery_attempts (started_at);

-- Both: the legacy partition up to the next Monday, the default one, ids going on where
-- they stopped, the parents scoped and granted as before, and four weeks ahead.
DO $$
DECLARE
    parent text;
    cutoff timestamptz := (date_trunc('week', now() AT TIME ZONE 'UTC') + interval '7 days')
                          AT TIME ZONE 'UTC';
BEGIN
    FOREACH parent IN ARRAY ARRAY['events', 'delivery_attempts'] LOOP
        EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (MINVALUE) TO (%L)',
                       parent, parent || '_legacy', cutoff);
        INSERT INTO history_partitions VALUES (parent || '_legacy', parent, '-infinity', cutoff);
        EXECUTE format('CREATE TABLE %I PARTITION OF %I DEFAULT', parent || '_default', parent);
        PERFORM history_scope(parent || '_default');
        EXECUTE format('SELECT setval(pg_get_serial_sequence(%L, ''id''), '
                       'coalesce((SELECT max(id) FROM %I), 0) + 1, false)',
                       parent, parent || '_legacy');
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', parent);
        EXECUTE format(
            'CREATE POLICY %I ON %I USING (organization_id = '
            'current_setting(''postbag.organization_id'', true)) WITH CHECK (organization_id = '
            'current_setting(''postbag.organization_id'', true))',
            parent || '_organization_scope', parent);
        EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %I TO postbag_app', parent);
        FOR week IN 0..3 LOOP
            PERFORM history_week_add(parent, cutoff + week * interval '7 days');
        END LOOP;
    END LOOP;
END;
$$;
REVOKE ALL ON events_legacy, delivery_attempts_legacy FROM postbag_app;
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO postbag_app;
REVOKE ALL ON history_partitions FROM postbag_app;
