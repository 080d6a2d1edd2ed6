"""Search: query intent, metadata filters, hybrid retrieval and fusion."""
