-- One heartbeat per worker and tick: a process running several ticks (`postbag worker`, the
-- local runner) keeps its `deliver` beat while it runs a digest or retention pass, so
-- /health counts the delivery workers alive by name.
ALTER TABLE worker_heartbeats DROP CONSTRAINT worker_heartbeats_pkey;
ALTER TABLE worker_heartbeats ADD CONSTRAINT worker_heartbeats_pkey PRIMARY KEY (worker_id, tick);
