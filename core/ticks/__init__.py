"""The scheduled passes: their registry and runner, digests, retention and housekeeping."""
