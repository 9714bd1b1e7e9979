-- A stream's revision: bumped by every change to what ingest reads of it (its own columns,
-- its schema versions, its routes, its organization's plan), as a form's is (0018). A
-- process that kept the stream's settings from an earlier ingest sends the revision it
-- holds with the insert, and the statement stores nothing when the stream has changed
-- since (`insert_stream_events`): the ingest then reads the settings afresh and runs again.
ALTER TABLE streams ADD COLUMN revision bigint NOT NULL DEFAULT 1;

-- postbag_form_revised (0018) moves NEW.revision, whichever table it is.
CREATE TRIGGER streams_revised BEFORE UPDATE ON streams
    FOR EACH ROW EXECUTE FUNCTION postbag_form_revised();

-- A route or a schema version written, changed or removed: its stream's revision moves.
CREATE FUNCTION postbag_revise_stream_of_row() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        UPDATE streams SET revision = revision + 1 WHERE id = OLD.stream_id;
    END IF;
    IF TG_OP = 'INSERT' OR (TG_OP = 'UPDATE' AND NEW.stream_id IS DISTINCT FROM OLD.stream_id) THEN
        UPDATE streams SET revision = revision + 1 WHERE id = NEW.stream_id;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER stream_routes_revise_stream AFTER INSERT OR UPDATE OR DELETE ON stream_routes
    FOR EACH ROW EXECUTE FUNCTION postbag_revise_stream_of_row();

CREATE TRIGGER stream_schemas_revise_stream AFTER INSERT OR UPDATE OR DELETE ON stream_schemas
    FOR EACH ROW EXECUTE FUNCTION postbag_revise_stream_of_row();

-- An organization's plan changed: the quota and retention of each of its streams did too.
CREATE FUNCTION postbag_revise_streams_of_organization() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- In id order, as every writer that locks several streams takes them.
    UPDATE streams SET revision = revision + 1
     WHERE id IN (SELECT id FROM streams WHERE organization_id = NEW.id
                   ORDER BY id FOR NO KEY UPDATE);
    RETURN NULL;
END
$$;

CREATE TRIGGER organizations_revise_streams AFTER UPDATE OF plan ON organizations
    FOR EACH ROW WHEN (OLD.plan IS DISTINCT FROM NEW.plan)
    EXECUTE FUNCTION postbag_revise_streams_of_organization();
