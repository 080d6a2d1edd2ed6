-- The planner's statistics of the chunks table, gathered before a large collection is fitted
-- (cari.search.fit: a fit comes when a collection is new or has doubled or halved). Until then
-- a collection loaded since the last ANALYZE is estimated from the others' rows, a few dozen
-- chunks, and every vector search of it (the fit's probes too) reads all its chunks instead of
-- the HNSW index; autovacuum analyses only after a tenth of the table has changed. SKIP_LOCKED:
-- an index build or a vacuum holding the table is not waited for; the next fit analyses.
ANALYZE (SKIP_LOCKED) chunks;
