-- For the start-up check: true when no bulk load holds the lock (a bulk load rebuilds its index
-- itself); the caller then repairs the missing or INVALID HNSW indexes and releases it with
-- vector_index_unlock. A session lock: the concurrent builds run outside any transaction, so
-- two start-up checks cannot build an index at once.
SELECT pg_try_advisory_lock(417001);
