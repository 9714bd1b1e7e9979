"""`postbag` as a client of a Postbag's `/v1` (docs/cli.md): login, forms, submissions,
deliveries, events, and the MCP server over stdio."""
