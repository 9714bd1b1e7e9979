"""Destination types, one module each behind one interface, with what they share: the
registry, the pinned HTTP client, the SSRF guard, message text and templates."""
