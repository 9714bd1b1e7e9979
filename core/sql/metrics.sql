-- name: deliveries_by_status
-- How many deliveries are in each status, across every organization (the `/metrics` gauge;
-- a scan of the table, read at most every few seconds per scraper).
SELECT status, count(*) AS count
  FROM deliveries
 GROUP BY status
