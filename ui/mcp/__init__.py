"""MCP servers in the UI: the servers dialog and the tool-call blocks."""
