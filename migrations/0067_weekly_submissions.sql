-- Submissions in weekly partitions (docs/scale.md), as 0061 did for the history tables:
-- ranges of `id`, which is time-ordered (`sub_` and 48 bits of milliseconds in Crockford
-- base32, core/platform/ids.py), so a week is the ids from `sub_<its first millisecond>0…`
-- to the next week's, compared byte by byte (the column's collation becomes "C"). The
-- primary key `(id, organization_id)` already holds the partition column, so every foreign
-- key to submissions keeps its columns.
--
-- Nothing moves: the table becomes its own `submissions_legacy` partition, covering every id
-- before the next Monday (00:00 UTC); weeks start there, and `submissions_default` catches
-- an id no week holds yet. A week leaves by DROP once every row in it is erased and past its
-- `erase_at` (a NULL `erase_at` keeps its week), after the rows that still reference it.
--
-- A partitioned table cannot enforce `(form_id, idempotency_key)` across weeks: 0066's
-- `submission_keys` does, and now goes with its submission (a foreign key to the parent).
--
-- Locks: submissions, deliveries, attachments, ham_due, spam_training and submission_keys
-- until the commit; the upgrade rebuilds the submissions indexes that hold `id` (the key and
-- the two inbox orders), scans submissions once to attach it and validates the foreign keys
-- to it again (docs/scale.md, "Upgrading").

-- The generalised machinery of 0061: a parent's partition column, and the bound of a week.
ALTER TABLE history_partitions DROP CONSTRAINT history_partitions_parent_check;
ALTER TABLE history_partitions ADD CONSTRAINT history_partitions_parent_check
    CHECK (parent IN ('events', 'delivery_attempts', 'submissions'));
COMMENT ON TABLE history_partitions IS
    'The dated partitions of the weekly partitioned tables (not the default ones), for the '
    'retention tick.';

CREATE OR REPLACE FUNCTION history_column(parent text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE parent WHEN 'events' THEN 'created_at' WHEN 'delivery_attempts' THEN 'started_at'
                       WHEN 'submissions' THEN 'id' END
$$;

-- The first submission id of the millisecond `at` (its 48 bits in ten base32 digits, the
-- random part zero): the bound of a week of submissions.
CREATE FUNCTION submission_id_bound(at timestamptz) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT 'sub_' || string_agg(substr('0123456789abcdefghjkmnpqrstvwxyz',
                                       ((floor(extract(epoch FROM at) * 1000)::bigint
                                         >> (5 * (9 - n))) & 31)::int + 1, 1), '' ORDER BY n)
           || repeat('0', 16)
      FROM generate_series(0, 9) AS n
$$;

-- The value of `parent`'s partition column where the moment `at` begins.
CREATE FUNCTION history_bound(parent text, at timestamptz) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT CASE parent WHEN 'submissions' THEN submission_id_bound(at) ELSE at::text END
$$;

-- As 0061's, through `history_bound`. Rows the default partition caught for the week move
-- in, except where a foreign key references the parent: moving such a row would delete
-- what references it, so that week is not made (its rows stay in the default partition).
CREATE OR REPLACE FUNCTION history_week_add(parent text, week_start timestamptz) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    week_end timestamptz := week_start + interval '7 days';
    partition text := parent || '_' || to_char(week_start AT TIME ZONE 'UTC', 'YYYYMMDD');
    col text := history_column(parent);
    low text := history_bound(parent, week_start);
    high text := history_bound(parent, week_end);
    caught boolean;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('history_partitions'));
    IF EXISTS (SELECT 1 FROM history_partitions p
                WHERE p.parent = history_week_add.parent
                  AND p.range_start < week_end AND p.range_end > week_start) THEN
        RETURN false;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_constraint c
                WHERE c.confrelid = parent::regclass AND c.contype = 'f') THEN
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I WHERE %I >= %L AND %I < %L)',
                       parent || '_default', col, low, col, high) INTO caught;
        IF caught THEN
            RETURN false;
        END IF;
    END IF;
    EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS)',
                   partition, parent);
    EXECUTE format('WITH moved AS (DELETE FROM %I WHERE %I >= %L AND %I < %L RETURNING *) '
                   'INSERT INTO %I SELECT * FROM moved',
                   parent || '_default', col, low, col, high, partition);
    EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)',
                   parent, partition, low, high);
    PERFORM history_scope(partition);
    INSERT INTO history_partitions VALUES (partition, parent, week_start, week_end);
    RETURN true;
END;
$$;

-- As 0061's, after deleting the rows of other tables that reference the partition's rows
-- (a foreign key to the parent refuses the detach while they exist; their own foreign keys
-- cascade as a delete of the row would).
CREATE OR REPLACE FUNCTION history_partition_drop(partition text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    owner text;
    reference record;
BEGIN
    SELECT parent INTO owner FROM history_partitions WHERE name = partition;
    IF owner IS NULL THEN
        RETURN;
    END IF;
    FOR reference IN
        SELECT c.conrelid::regclass AS child,
               string_agg(format('r.%I = p.%I', ca.attname, pa.attname), ' AND ') AS joined
          FROM pg_constraint c
          CROSS JOIN LATERAL unnest(c.conkey, c.confkey) AS k(child_col, parent_col)
          JOIN pg_attribute ca ON ca.attrelid = c.conrelid AND ca.attnum = k.child_col
          JOIN pg_attribute pa ON pa.attrelid = c.confrelid AND pa.attnum = k.parent_col
         WHERE c.confrelid = owner::regclass AND c.contype = 'f' AND c.conparentid = 0
         GROUP BY c.oid, c.conrelid
         ORDER BY c.conrelid::regclass::text
    LOOP
        EXECUTE format('DELETE FROM %s r USING %I p WHERE %s',
                       reference.child, partition, reference.joined);
    END LOOP;
    EXECUTE format('ALTER TABLE %I DETACH PARTITION %I', owner, partition);
    EXECUTE format('DROP TABLE %I', partition);
    DELETE FROM history_partitions WHERE name = partition;
END;
$$;

-- Whether every submission in a week's partition is erased and past its erase time at
-- `at`: first the erase queue's index (any row not erased), then a read of the week.
CREATE FUNCTION submissions_week_expired(partition text, at timestamptz) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
DECLARE
    found boolean;
BEGIN
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I WHERE erased_at IS NULL)', partition)
        INTO found;
    IF found THEN
        RETURN false;
    END IF;
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I WHERE erase_at IS NULL OR erase_at > $1)',
                   partition) INTO found USING at;
    RETURN NOT found;
END;
$$;

-- The old table, made the legacy partition: ids compared byte by byte, its keys renamed.
ALTER TABLE deliveries DROP CONSTRAINT deliveries_submission_id_organization_id_fkey;
ALTER TABLE attachments DROP CONSTRAINT attachments_submission_id_organization_id_fkey;
ALTER TABLE ham_due DROP CONSTRAINT ham_due_submission_id_organization_id_fkey;
ALTER TABLE spam_training DROP CONSTRAINT spam_training_submission_id_organization_id_fkey;
ALTER TABLE submissions DROP CONSTRAINT submissions_form_idempotency_key;
ALTER TABLE submissions ALTER COLUMN id TYPE text COLLATE "C";
ALTER TABLE submissions RENAME TO submissions_legacy;
ALTER INDEX submissions_pkey RENAME TO submissions_legacy_pkey;
ALTER INDEX submissions_form_received_idx RENAME TO submissions_legacy_form_received_idx;
ALTER INDEX submissions_organization_received_idx
    RENAME TO submissions_legacy_organization_received_idx;
ALTER INDEX submissions_client_recent_idx RENAME TO submissions_legacy_client_recent_idx;
ALTER INDEX submissions_erase_due_idx RENAME TO submissions_legacy_erase_due_idx;
ALTER INDEX submissions_form_spam_idx RENAME TO submissions_legacy_form_spam_idx;
ALTER POLICY submissions_organization_scope ON submissions_legacy
    RENAME TO submissions_legacy_organization_scope;

CREATE TABLE submissions (
    LIKE submissions_legacy INCLUDING DEFAULTS INCLUDING CONSTRAINTS,
    CONSTRAINT submissions_pkey PRIMARY KEY (id, organization_id),
    CONSTRAINT submissions_form_id_organization_id_fkey FOREIGN KEY (form_id, organization_id)
        REFERENCES forms (id, organization_id) ON DELETE CASCADE
) PARTITION BY RANGE (id);
CREATE INDEX submissions_form_received_idx ON submissions (form_id, received_at DESC, id DESC);
CREATE INDEX submissions_organization_received_idx
    ON submissions (organization_id, received_at DESC, id DESC);
CREATE INDEX submissions_client_recent_idx ON submissions (form_id, client_hash, received_at);
CREATE INDEX submissions_erase_due_idx ON submissions (erase_at) WHERE erased_at IS NULL;
CREATE INDEX submissions_form_spam_idx ON submissions (form_id, received_at)
    WHERE status <> 'accepted';
-- The trigram index where 0059 made it (pg_trgm was there).
DO $$
BEGIN
    IF to_regclass('submissions_values_trigram_idx') IS NOT NULL THEN
        ALTER INDEX submissions_values_trigram_idx RENAME TO submissions_legacy_values_trigram_idx;
        CREATE INDEX submissions_values_trigram_idx
            ON submissions USING gin (left("values"::text, 10000) gin_trgm_ops);
    END IF;
END;
$$;

DO $$
DECLARE
    cutoff timestamptz := (date_trunc('week', now() AT TIME ZONE 'UTC') + interval '7 days')
                          AT TIME ZONE 'UTC';
BEGIN
    EXECUTE format('ALTER TABLE submissions ATTACH PARTITION submissions_legacy '
                   'FOR VALUES FROM (MINVALUE) TO (%L)', submission_id_bound(cutoff));
    INSERT INTO history_partitions VALUES ('submissions_legacy', 'submissions', '-infinity', cutoff);
    CREATE TABLE submissions_default PARTITION OF submissions DEFAULT;
    PERFORM history_scope('submissions_default');
    FOR week IN 0..3 LOOP
        PERFORM history_week_add('submissions', cutoff + week * interval '7 days');
    END LOOP;
END;
$$;
ALTER TABLE submissions ENABLE ROW LEVEL SECURITY;
CREATE POLICY submissions_organization_scope ON submissions
    USING (organization_id = current_setting('postbag.organization_id', true))
    WITH CHECK (organization_id = current_setting('postbag.organization_id', true));
GRANT SELECT, INSERT, UPDATE, DELETE ON submissions TO postbag_app;
REVOKE ALL ON submissions_legacy FROM postbag_app;

-- Every foreign key to submissions, now to the partitioned table (each validated again), and
-- the idempotency keys' own.
ALTER TABLE deliveries ADD CONSTRAINT deliveries_submission_id_organization_id_fkey
    FOREIGN KEY (submission_id, organization_id)
    REFERENCES submissions (id, organization_id) ON DELETE CASCADE;
ALTER TABLE attachments ADD CONSTRAINT attachments_submission_id_organization_id_fkey
    FOREIGN KEY (submission_id, organization_id)
    REFERENCES submissions (id, organization_id) ON DELETE CASCADE;
ALTER TABLE ham_due ADD CONSTRAINT ham_due_submission_id_organization_id_fkey
    FOREIGN KEY (submission_id, organization_id)
    REFERENCES submissions (id, organization_id) ON DELETE CASCADE;
ALTER TABLE spam_training ADD CONSTRAINT spam_training_submission_id_organization_id_fkey
    FOREIGN KEY (submission_id, organization_id)
    REFERENCES submissions (id, organization_id) ON DELETE CASCADE;
ALTER TABLE submission_keys ADD CONSTRAINT submission_keys_submission_id_organization_id_fkey
    FOREIGN KEY (submission_id, organization_id)
    REFERENCES submissions (id, organization_id) ON DELETE CASCADE;
