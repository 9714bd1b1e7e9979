"""Streams: keyed JSON events from servers, checked by schema and fanned out (docs/streams.md)."""
