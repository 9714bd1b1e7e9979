-- Teams, part A: API keys with roles, and the audit trail (docs/teams.md).

-- A key acts with its role everywhere (`/v1`, `/mcp`, the dashboard it signs in to).
-- Keys made before roles keep what they could do: admin.
ALTER TABLE api_keys ADD COLUMN role text NOT NULL DEFAULT 'admin'
    CHECK (role IN ('owner', 'admin', 'operator', 'viewer'));

-- One row per change and per read of visitors' data, never the values themselves.
-- Each organization's rows form a chain: `seq` counts from 1 (or from the anchor left by
-- `audit_forget_before`), and `hash` is the SHA-256 of the previous row's hash and this
-- row's canonical content (core/owner/audit.py). Appended under a per-organization
-- advisory lock; the unique (organization_id, seq) refuses a fork even without it.
CREATE TABLE audit_log (
    id              text PRIMARY KEY CHECK (id LIKE 'aud\_%'),
    organization_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    seq             bigint NOT NULL CHECK (seq >= 1),
    at              timestamptz NOT NULL,
    actor_kind      text NOT NULL CHECK (actor_kind IN ('member', 'key', 'operator')),
    actor_id        text NOT NULL,
    actor_name      text NOT NULL,
    action          text NOT NULL CHECK (action ~ '^[a-z_]+\.[a-z_]+$'),
    subject         text,
    via             text NOT NULL CHECK (via IN ('api', 'mcp', 'dashboard', 'cli')),
    ip              text,
    user_agent      text,
    prev_hash       text NOT NULL CHECK (prev_hash ~ '^[0-9a-f]{64}$'),
    hash            text NOT NULL CHECK (hash ~ '^[0-9a-f]{64}$'),
    UNIQUE (organization_id, seq)
);
CREATE INDEX audit_log_organization_at_idx ON audit_log (organization_id, at);

-- Where an organization's chain starts after `audit_forget_before` dropped its oldest rows:
-- the last forgotten row's seq and hash, which the first kept row must follow.
CREATE TABLE audit_anchors (
    organization_id text PRIMARY KEY REFERENCES organizations (id) ON DELETE CASCADE,
    seq             bigint NOT NULL,
    hash            text NOT NULL CHECK (hash ~ '^[0-9a-f]{64}$'),
    forgotten_at    timestamptz NOT NULL
);

-- Append-only for every role, the table's owner included: UPDATE, DELETE and TRUNCATE
-- raise, except the deletes of `audit_forget_before` (a whole old prefix of one chain)
-- and the cascade of a deleted organization (its whole chain goes with it).
CREATE FUNCTION audit_log_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        IF current_setting('postbag.audit_forget', true) = OLD.organization_id
           OR NOT EXISTS (SELECT 1 FROM organizations WHERE id = OLD.organization_id) THEN
            RETURN OLD;
        END IF;
    END IF;
    RAISE EXCEPTION 'audit_log is append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$;
CREATE TRIGGER audit_log_append_only BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_log_append_only();
CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION audit_log_append_only();

-- Retention, run by the operator as the owner: forget an organization's rows older than
-- `before`, a whole prefix of its chain (up to the newest row before `before`), and keep
-- the last forgotten row as the chain's anchor. Answers how many rows went.
CREATE FUNCTION audit_forget_before(org text, before timestamptz) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    last_seq  bigint;
    last_hash text;
    gone      bigint;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended('postbag.audit:' || org, 0));
    SELECT seq, hash INTO last_seq, last_hash
      FROM audit_log
     WHERE organization_id = org AND at < before
     ORDER BY seq DESC LIMIT 1;
    IF last_seq IS NULL THEN
        RETURN 0;
    END IF;
    PERFORM set_config('postbag.audit_forget', org, true);
    DELETE FROM audit_log WHERE organization_id = org AND seq <= last_seq;
    GET DIAGNOSTICS gone = ROW_COUNT;
    PERFORM set_config('postbag.audit_forget', '', true);
    INSERT INTO audit_anchors (organization_id, seq, hash, forgotten_at)
    VALUES (org, last_seq, last_hash, now())
    ON CONFLICT (organization_id)
    DO UPDATE SET seq = EXCLUDED.seq, hash = EXCLUDED.hash, forgotten_at = EXCLUDED.forgotten_at;
    RETURN gone;
END;
$$;
REVOKE ALL ON FUNCTION audit_forget_before(text, timestamptz) FROM PUBLIC;

ALTER TABLE audit_log ENABLE ROW LEVEL SECURITY;
CREATE POLICY audit_log_organization_scope ON audit_log
    USING (organization_id = current_setting('postbag.organization_id', true))
    WITH CHECK (organization_id = current_setting('postbag.organization_id', true));
ALTER TABLE audit_anchors ENABLE ROW LEVEL SECURITY;
CREATE POLICY audit_anchors_organization_scope ON audit_anchors
    USING (organization_id = current_setting('postbag.organization_id', true));
-- The application role appends and reads; it can neither change nor remove a row.
REVOKE ALL ON audit_log, audit_anchors FROM postbag_app;
GRANT SELECT, INSERT ON audit_log TO postbag_app;
GRANT SELECT ON audit_anchors TO postbag_app;
