-- Every counted submit of an organization added 1 to the same usage_counters row, so
-- concurrent submits queued on that row's lock until the one before had committed (fsync
-- included). The month's count is now spread over up to 16 slot rows (the submit's
-- backend picks one), and readers add the slots up.
ALTER TABLE usage_counters
    ADD COLUMN slot smallint NOT NULL DEFAULT 0 CHECK (slot BETWEEN 0 AND 15);

ALTER TABLE usage_counters
    DROP CONSTRAINT usage_counters_pkey,
    ADD CONSTRAINT usage_counters_pkey PRIMARY KEY (organization_id, month, slot);
