"""The agent tools (MCP): the tools and their bounds, the server over stdio (`trace-explorer mcp`) and at `/mcp`."""
