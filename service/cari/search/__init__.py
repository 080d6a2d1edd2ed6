"""Search: query signals and routes, metadata filters, hybrid retrieval and fusion."""
