"""Postbag's domain logic: everything the handlers, the local runner and the CLI call."""

__version__ = "0.1.0"
