-- Bulk replay (`POST /v1/deliveries/replay`): one row per replay, and on each delivery the
-- replay that last queued it, from which a replay's progress is counted.
CREATE TABLE replays (
    id              text PRIMARY KEY CHECK (id LIKE 'rpl\_%'),
    organization_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    filter          jsonb NOT NULL,
    total           integer NOT NULL CHECK (total >= 0),
    per_second      integer NOT NULL CHECK (per_second BETWEEN 1 AND 50),
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX replays_organization_idx ON replays (organization_id, id);

ALTER TABLE deliveries ADD COLUMN replay_id text;
CREATE INDEX deliveries_replay_idx ON deliveries (replay_id) WHERE replay_id IS NOT NULL;

ALTER TABLE replays ENABLE ROW LEVEL SECURITY;
CREATE POLICY replays_organization_scope ON replays
    USING (organization_id = current_setting('postbag.organization_id', true))
    WITH CHECK (organization_id = current_setting('postbag.organization_id', true));
GRANT SELECT, INSERT ON replays TO postbag_app;
