"""The MCP edge: Cari's search, answers and documents as tools for AI agents."""
