-- Index scans off ('off') for the exact top k: search_vector.sql then reads every vector of
-- the collection and sorts them, as the HNSW index approximates; back on ('on') to measure
-- the index. Local to the tuning's transaction.
SELECT set_config('enable_indexscan', %(scans)s, true),
       set_config('enable_bitmapscan', %(scans)s, true);
