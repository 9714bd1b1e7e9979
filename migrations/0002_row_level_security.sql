-- The second fence behind the repositories' OrgScope: tenant work runs as postbag_app
-- (SET LOCAL ROLE) with the session setting postbag.organization_id, and every tenant
-- table only shows that organization's rows. The public submit lookup and the workers,
-- which cross organizations by design, run as the owner.

DO $$
BEGIN
    CREATE ROLE postbag_app NOLOGIN;
EXCEPTION
    WHEN duplicate_object OR unique_violation THEN NULL;
END;
$$;

DO $$
DECLARE
    tenant_table text;
BEGIN
    FOR tenant_table IN
        SELECT c.table_name
          FROM information_schema.columns c
          JOIN information_schema.tables t
            ON t.table_schema = c.table_schema AND t.table_name = c.table_name
         WHERE c.table_schema = current_schema()
           AND c.column_name = 'organization_id'
           AND t.table_type = 'BASE TABLE'
    LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', tenant_table);
        EXECUTE format(
            'CREATE POLICY %I ON %I USING (organization_id = '
            'current_setting(''postbag.organization_id'', true)) WITH CHECK (organization_id = '
            'current_setting(''postbag.organization_id'', true))',
            tenant_table || '_organization_scope', tenant_table);
    END LOOP;
    ALTER TABLE organizations ENABLE ROW LEVEL SECURITY;
    CREATE POLICY organizations_organization_scope ON organizations
        USING (id = current_setting('postbag.organization_id', true));
END;
$$;

GRANT USAGE ON SCHEMA public TO postbag_app;
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO postbag_app;
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO postbag_app;
REVOKE ALL ON schema_migrations FROM postbag_app;
