"""The `/v1` routers of the management API."""
