"""The MCP server (`hybridrag mcp`): the service's search as tools for any MCP host (extra `mcp`)."""
