-- The audit trail's scheduled export (docs/teams.md#the-audit-trail-leaves-the-building):
-- how far each organization's chain has been written to the export bucket, one object per
-- UTC day. The next object names this row's hash as its predecessor's last, and retention
-- forgets no row after `last_seq` while an export is configured.
CREATE TABLE audit_exports (
    organization_id text PRIMARY KEY REFERENCES organizations (id) ON DELETE CASCADE,
    day             date NOT NULL,
    last_seq        bigint NOT NULL CHECK (last_seq >= 1),
    last_hash       text NOT NULL CHECK (last_hash ~ '^[0-9a-f]{64}$'),
    last_at         timestamptz NOT NULL,
    exported_at     timestamptz NOT NULL
);
ALTER TABLE audit_exports ENABLE ROW LEVEL SECURITY;
CREATE POLICY audit_exports_organization_scope ON audit_exports
    USING (organization_id = current_setting('postbag.organization_id', true));
-- Only the retention tick (the owner) writes it.
REVOKE ALL ON audit_exports FROM postbag_app;
GRANT SELECT ON audit_exports TO postbag_app;
