-- Local to the catalog vector search's transaction: the HNSW scan keeps returning neighbours
-- until enough rows pass the WHERE clause (other collections' items).
SELECT set_config('hnsw.iterative_scan', 'strict_order', true);
