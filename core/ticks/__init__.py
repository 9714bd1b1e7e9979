"""The scheduled passes: their registry and runners, digests, retention and its passes."""
