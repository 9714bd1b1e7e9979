-- Search over a submission's values (`GET /v1/submissions?q=`, the inbox's search box).
-- The words are derived from the values by the database itself, so they exist exactly as
-- long as the values do: erase and expiry set "values" to NULL, and the column with them.
-- Only the first 10,000 characters of the values' JSON text are read (field names
-- included): a contact form's message is searchable whole, the words of the largest
-- submission stay far below PostgreSQL's 1 MB limit on one tsvector (no post can fail to be
-- stored for its words), and a flood of large posts stores little more than its values. The 'simple' configuration
-- lower-cases words and stems none, so any language matches word for word.
ALTER TABLE submissions ADD COLUMN search tsvector
    GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, left("values"::text, 10000))) STORED;

CREATE INDEX submissions_search_idx ON submissions USING gin (search);
