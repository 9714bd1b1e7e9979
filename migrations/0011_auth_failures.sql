-- Throttling of failed sign-ins and bad API keys (core/owner/throttle.py): one counter per
-- kind, client and fixed window. The client is an HMAC of its address (or IPv6 /64),
-- never the address. Not a tenant table: a failure belongs to no organization.
CREATE TABLE auth_failures (
    kind            text NOT NULL CHECK (kind IN ('sign_in', 'api_key')),
    client_hash     bytea NOT NULL,
    window_start    timestamptz NOT NULL,
    failures        integer NOT NULL CHECK (failures >= 0),
    PRIMARY KEY (kind, client_hash, window_start)
);
CREATE INDEX auth_failures_window_start_idx ON auth_failures (window_start);
