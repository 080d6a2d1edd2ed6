-- Released when a bulk load has rebuilt the HNSW index.
SELECT pg_advisory_unlock(417001);
