-- Held for a whole bulk load (the check whether its width is shared, the drop, the load, the
-- rebuild of the HNSW index); a second bulk load waits. The key is Cari's own: the same in
-- vector_index_try_lock and vector_index_unlock.
SELECT pg_advisory_lock(417001);
