-- Search keeps its plan from one ANALYZE to the next (docs/scale.md, "Search's plan").
--
-- A search's plan follows how often the planner thinks the word occurs, read from the
-- statistics ANALYZE samples for the trigram index's expression. With the default sample a
-- word 1 in 1,000 submissions hold was now and then taken for a common one, and the plan
-- read the organization's rows newest first, testing each (206 ms instead of 8 ms at
-- 1,000,000 submissions, after 2 of 35 ANALYZEs). Ten times the sample keeps the estimate
-- near the truth; ANALYZE then reads up to 300,000 rows of a partition for that index.
--
-- A partition's index does not take its parent's setting: it is set on each, and
-- `history_week_add` sets it on the indexes of every week it makes.
DO $$
DECLARE
    part regclass;
BEGIN
    IF to_regclass('submissions_values_trigram_idx') IS NULL THEN
        RETURN;
    END IF;
    ALTER INDEX submissions_values_trigram_idx ALTER COLUMN 1 SET STATISTICS 1000;
    FOR part IN
        SELECT inhrelid::regclass FROM pg_inherits
         WHERE inhparent = 'submissions_values_trigram_idx'::regclass
    LOOP
        EXECUTE format('ALTER INDEX %s ALTER COLUMN 1 SET STATISTICS 1000', part);
    END LOOP;
END;
$$;

-- As 0067's, then each index of the new week takes the statistics targets its parent index
-- has on its columns.
CREATE OR REPLACE FUNCTION history_week_add(parent text, week_start timestamptz) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    week_end timestamptz := week_start + interval '7 days';
    partition text := parent || '_' || to_char(week_start AT TIME ZONE 'UTC', 'YYYYMMDD');
    col text := history_column(parent);
    low text := history_bound(parent, week_start);
    high text := history_bound(parent, week_end);
    caught boolean;
    target record;
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
    FOR target IN
        SELECT i.inhrelid::regclass AS index, a.attnum, a.attstattarget
          FROM pg_inherits i
          JOIN pg_index x ON x.indexrelid = i.inhrelid
          JOIN pg_attribute a ON a.attrelid = i.inhparent AND a.attnum > 0
         WHERE x.indrelid = partition::regclass AND a.attstattarget > 0
    LOOP
        EXECUTE format('ALTER INDEX %s ALTER COLUMN %s SET STATISTICS %s',
                       target.index, target.attnum, target.attstattarget);
    END LOOP;
    PERFORM history_scope(partition);
    INSERT INTO history_partitions VALUES (partition, parent, week_start, week_end);
    RETURN true;
END;
$$;
