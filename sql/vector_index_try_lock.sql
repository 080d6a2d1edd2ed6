-- For the start-up check: true when an HNSW index is missing and no bulk load holds the lock
-- (a bulk load rebuilds the index itself). The lock is held to the end of the transaction, so
-- two start-up checks cannot build the index at once; when nothing is missing no lock is taken.
SELECT (to_regclass('chunks_embedding_idx') IS NULL
        OR to_regclass('catalog_items_embedding_idx') IS NULL)
       AND pg_try_advisory_xact_lock(417001);
