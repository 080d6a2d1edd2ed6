-- Per-request HNSW settings, local to the search's transaction. Iterative scans keep returning
-- neighbours until enough rows pass the WHERE clause (other collections, metadata filters).
SELECT set_config('hnsw.ef_search', %(ef_search)s::text, true),
       set_config('hnsw.iterative_scan', 'strict_order', true);
