-- The visitor's field order (jsonb keeps no key order: it stores keys shortest first).
--
-- A submission keeps the names of its values in the order they were posted, beside the
-- values; rows stored before this have none and are shown in the documented fallback order
-- (the form's labels in their order, then the other names alphabetically). A form's labels
-- become `json`, which keeps the order the owner declared them in; no statement needs
-- jsonb operators on them.
ALTER TABLE submissions ADD COLUMN field_order text[];

ALTER TABLE forms ALTER COLUMN labels DROP DEFAULT;
ALTER TABLE forms ALTER COLUMN labels TYPE json USING labels::json;
ALTER TABLE forms ALTER COLUMN labels SET DEFAULT '{}';
