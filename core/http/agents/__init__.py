"""The MCP server: Postbag's `/v1` as tools for an assistant, over stdio and at `/mcp`."""
