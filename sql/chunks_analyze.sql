-- The planner's statistics of the chunks table, gathered at the end of a bulk load: until
-- then a collection loaded since the last ANALYZE is estimated from the others' rows (or from
-- none), a few dozen chunks, and its vector searches scan every chunk instead of the HNSW
-- index until autovacuum gets to the table (cari.ingest.bulk).
ANALYZE chunks;
