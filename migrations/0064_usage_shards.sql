-- More shards for the month's counts: 64 rows per organization and month instead of 16.
--
-- A submit adds one to a shard chosen at random, holding that row's lock until it commits.
-- With 15 shards for submissions, 16 submits in flight for one organization met on a row
-- about half the time, and the later one waited for the earlier one's commit: sampled
-- during pgbench of the submit statement at 16 connections, 30% of the backends were waiting
-- on another transaction (`Lock:transactionid`), 10% with 63 shards. Readers add the shards
-- up, which costs an index range of at most 64 rows. Shard 0 still holds the attachment and
-- review bytes, each limit checked under that one row's lock; submissions and stream events
-- are counted on shards 1 to 63.
ALTER TABLE usage_counters DROP CONSTRAINT usage_counters_shard_check;
ALTER TABLE usage_counters ADD CONSTRAINT usage_counters_shard_check
    CHECK (shard BETWEEN 0 AND 63);
