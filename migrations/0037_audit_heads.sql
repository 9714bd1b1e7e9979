-- The audit trail, round three (docs/teams.md "Nobody rewrites it"): no session setting lets
-- a row go but a forgotten prefix, and each chain keeps its head where `postbag audit verify`
-- sees the newest rows go even when a superuser removes them behind the triggers.

-- Each organization's chain head: the seq and hash of the newest row ever appended (seq has
-- no gaps, so it is also the count of rows appended). Moved only by the insert trigger on
-- audit_log, in the append's own statement; forgetting a prefix leaves it where it is.
CREATE TABLE audit_heads (
    organization_id text PRIMARY KEY REFERENCES organizations (id) ON DELETE CASCADE,
    seq             bigint NOT NULL CHECK (seq >= 1),
    hash            text NOT NULL CHECK (hash ~ '^[0-9a-f]{64}$')
);
-- The chains as they stand: their newest row, or the anchor of a chain wholly forgotten.
INSERT INTO audit_heads (organization_id, seq, hash)
SELECT DISTINCT ON (organization_id) organization_id, seq, hash
  FROM audit_log
 ORDER BY organization_id, seq DESC;
INSERT INTO audit_heads (organization_id, seq, hash)
SELECT organization_id, seq, hash
  FROM audit_anchors a
 WHERE NOT EXISTS (SELECT 1 FROM audit_heads h WHERE h.organization_id = a.organization_id);

-- A row goes only at or before its chain's anchor (retention's forgotten prefix), or with its
-- organization. Before, a session setting any role could set let any row go. The guards run
-- as the owner: a role that sees organizations through row-level security must not take an
-- organization it cannot see for deleted.
CREATE OR REPLACE FUNCTION audit_log_append_only() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        IF NOT EXISTS (SELECT 1 FROM organizations WHERE id = OLD.organization_id)
           OR OLD.seq <= (SELECT seq FROM audit_anchors
                           WHERE organization_id = OLD.organization_id) THEN
            RETURN OLD;
        END IF;
    END IF;
    RAISE EXCEPTION 'audit_log is append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$;

-- An appended row must follow its chain's head (or anchor, or the start), and becomes the
-- head. Runs as the owner so the application role needs no write on audit_heads.
CREATE FUNCTION audit_log_advance_head() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    head_seq  bigint;
    head_hash text;
BEGIN
    SELECT seq, hash INTO head_seq, head_hash
      FROM audit_heads WHERE organization_id = NEW.organization_id FOR UPDATE;
    IF NOT FOUND THEN
        SELECT seq, hash INTO head_seq, head_hash
          FROM audit_anchors WHERE organization_id = NEW.organization_id;
    END IF;
    IF NEW.seq <> coalesce(head_seq, 0) + 1
       OR NEW.prev_hash <> coalesce(head_hash, repeat('0', 64)) THEN
        RAISE EXCEPTION 'audit_log row % does not follow its chain''s head (row %)',
            NEW.seq, coalesce(head_seq, 0)
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    INSERT INTO audit_heads (organization_id, seq, hash)
    VALUES (NEW.organization_id, NEW.seq, NEW.hash)
    ON CONFLICT (organization_id) DO UPDATE SET seq = EXCLUDED.seq, hash = EXCLUDED.hash;
    RETURN NULL;
END;
$$;
CREATE TRIGGER audit_log_advance_head AFTER INSERT ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_log_advance_head();

-- The head moves one row forward, onto the row just appended, and only from the insert
-- trigger above; it goes only with its organization.
CREATE FUNCTION audit_heads_guard() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        IF NOT EXISTS (SELECT 1 FROM organizations WHERE id = OLD.organization_id) THEN
            RETURN OLD;
        END IF;
    ELSIF TG_OP <> 'TRUNCATE' AND pg_trigger_depth() > 1
          AND (TG_OP = 'INSERT'
               OR (NEW.organization_id = OLD.organization_id AND NEW.seq = OLD.seq + 1))
          AND EXISTS (SELECT 1 FROM audit_log
                       WHERE organization_id = NEW.organization_id
                         AND seq = NEW.seq AND hash = NEW.hash) THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'audit_heads moves only with an appended row: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$;
CREATE TRIGGER audit_heads_guard BEFORE INSERT OR UPDATE OR DELETE ON audit_heads
    FOR EACH ROW EXECUTE FUNCTION audit_heads_guard();
CREATE TRIGGER audit_heads_no_truncate BEFORE TRUNCATE ON audit_heads
    FOR EACH STATEMENT EXECUTE FUNCTION audit_heads_guard();

-- The anchor moves only forward, onto a row of its chain (which the delete trigger then
-- lets go, with every row before it); it goes only with its organization.
CREATE FUNCTION audit_anchors_guard() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        IF NOT EXISTS (SELECT 1 FROM organizations WHERE id = OLD.organization_id) THEN
            RETURN OLD;
        END IF;
    ELSIF TG_OP <> 'TRUNCATE'
          AND (TG_OP = 'INSERT'
               OR (NEW.organization_id = OLD.organization_id AND NEW.seq > OLD.seq))
          AND EXISTS (SELECT 1 FROM audit_log
                       WHERE organization_id = NEW.organization_id
                         AND seq = NEW.seq AND hash = NEW.hash) THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'audit_anchors moves only forward onto a row of its chain: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$;
CREATE TRIGGER audit_anchors_guard BEFORE INSERT OR UPDATE OR DELETE ON audit_anchors
    FOR EACH ROW EXECUTE FUNCTION audit_anchors_guard();
CREATE TRIGGER audit_anchors_no_truncate BEFORE TRUNCATE ON audit_anchors
    FOR EACH STATEMENT EXECUTE FUNCTION audit_anchors_guard();

-- Retention moves the anchor onto the newest row older than `before`, then forgets every
-- row up to it (what the delete trigger now allows); the head stays.
CREATE OR REPLACE FUNCTION audit_forget_before(org text, before timestamptz) RETURNS bigint
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
    INSERT INTO audit_anchors (organization_id, seq, hash, forgotten_at)
    VALUES (org, last_seq, last_hash, now())
    ON CONFLICT (organization_id)
    DO UPDATE SET seq = EXCLUDED.seq, hash = EXCLUDED.hash, forgotten_at = EXCLUDED.forgotten_at;
    DELETE FROM audit_log WHERE organization_id = org AND seq <= last_seq;
    GET DIAGNOSTICS gone = ROW_COUNT;
    RETURN gone;
END;
$$;

ALTER TABLE audit_heads ENABLE ROW LEVEL SECURITY;
CREATE POLICY audit_heads_organization_scope ON audit_heads
    USING (organization_id = current_setting('postbag.organization_id', true));
-- The application role reads the head to append after it; only the trigger moves it.
REVOKE ALL ON audit_heads FROM postbag_app;
GRANT SELECT ON audit_heads TO postbag_app;
