-- Released when a bulk load has rebuilt the HNSW index, or the start-up check repaired them.
SELECT pg_advisory_unlock(417001);
