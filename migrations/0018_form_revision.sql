-- A form's revision: bumped by every change to what the submit path reads of it (its own
-- columns, its schema versions, its routes, its organization's plan). A process that kept
-- the form from an earlier submit sends the revision it holds with the insert, and the
-- statement stores nothing when the form has changed since (`insert_submission`): the
-- submit then reads the form afresh and runs again.
ALTER TABLE forms ADD COLUMN revision bigint NOT NULL DEFAULT 1;

CREATE FUNCTION postbag_form_revised() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- An update that moved the revision itself (the triggers below) counts once.
    IF NEW.revision = OLD.revision THEN
        NEW.revision := OLD.revision + 1;
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER forms_revised BEFORE UPDATE ON forms
    FOR EACH ROW EXECUTE FUNCTION postbag_form_revised();

-- A route or a schema version written, changed or removed: its form's revision moves.
CREATE FUNCTION postbag_revise_form_of_row() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        UPDATE forms SET revision = revision + 1 WHERE id = OLD.form_id;
    END IF;
    IF TG_OP = 'INSERT' OR (TG_OP = 'UPDATE' AND NEW.form_id IS DISTINCT FROM OLD.form_id) THEN
        UPDATE forms SET revision = revision + 1 WHERE id = NEW.form_id;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER routes_revise_form AFTER INSERT OR UPDATE OR DELETE ON routes
    FOR EACH ROW EXECUTE FUNCTION postbag_revise_form_of_row();

CREATE TRIGGER form_schemas_revise_form AFTER INSERT OR UPDATE OR DELETE ON form_schemas
    FOR EACH ROW EXECUTE FUNCTION postbag_revise_form_of_row();

-- An organization's plan changed: the quota and retention of each of its forms did too.
CREATE FUNCTION postbag_revise_forms_of_organization() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- In id order, as every writer that locks several forms takes them.
    UPDATE forms SET revision = revision + 1
     WHERE id IN (SELECT id FROM forms WHERE organization_id = NEW.id
                   ORDER BY id FOR NO KEY UPDATE);
    RETURN NULL;
END
$$;

CREATE TRIGGER organizations_revise_forms AFTER UPDATE OF plan ON organizations
    FOR EACH ROW WHEN (OLD.plan IS DISTINCT FROM NEW.plan)
    EXECUTE FUNCTION postbag_revise_forms_of_organization();
