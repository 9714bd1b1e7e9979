-- Fewer writes per submission and per delivery.
--
-- The month's submission count is spread over 16 rows per organization and month (a
-- submit adds one to a shard chosen at random; readers add the shards up). With one row,
-- every submit of an organization waited for the previous one's commit on that row's lock,
-- so one busy form capped its organization's submissions at one commit at a time.
-- Attachment bytes stay on shard 0: their limit is checked under that one row's lock.
ALTER TABLE usage_counters
    ADD COLUMN shard smallint NOT NULL DEFAULT 0 CHECK (shard BETWEEN 0 AND 15);
ALTER TABLE usage_counters DROP CONSTRAINT usage_counters_pkey;
ALTER TABLE usage_counters
    ADD CONSTRAINT usage_counters_pkey PRIMARY KEY (organization_id, month, shard);

-- Every write of a delivery (its insert, its claim, its outcome) adds an entry to each of
-- its table's full indexes. Two of them said nothing new: `deliveries_submission_idx` is
-- the prefix of `deliveries_submission_route_key`, and the digest key held one entry per
-- delivery that is not a digest's (a null).
DROP INDEX deliveries_submission_idx;
ALTER TABLE deliveries DROP CONSTRAINT deliveries_digest_key;
CREATE UNIQUE INDEX deliveries_digest_key ON deliveries (digest_id) WHERE digest_id IS NOT NULL;
