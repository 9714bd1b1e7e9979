-- Destination types as a reference table instead of two hand-kept CHECK lists: the code's
-- registry (core/destinations/registry.py) records each type it knows, with its attempt
-- limit, every time `postbag migrate` runs, and foreign keys make the database refuse any
-- other type. Adding a type is adding its module; no migration names it.
CREATE TABLE destination_types (
    name         text PRIMARY KEY CHECK (name ~ '^[a-z][a-z0-9_]{0,31}$'),
    max_attempts integer NOT NULL CHECK (max_attempts >= 1)
);

-- The types existing rows use, so the foreign keys hold before the registry records its
-- own (which also sets their real attempt limits).
INSERT INTO destination_types (name, max_attempts)
SELECT type, 1 FROM destinations
 UNION
SELECT channel, 1 FROM deliveries
ON CONFLICT DO NOTHING;

ALTER TABLE destinations
    DROP CONSTRAINT destinations_type_check,
    ADD CONSTRAINT destinations_type_fkey
        FOREIGN KEY (type) REFERENCES destination_types (name);

ALTER TABLE deliveries
    DROP CONSTRAINT deliveries_channel_check,
    ADD CONSTRAINT deliveries_channel_fkey
        FOREIGN KEY (channel) REFERENCES destination_types (name);

GRANT SELECT ON destination_types TO postbag_app;
