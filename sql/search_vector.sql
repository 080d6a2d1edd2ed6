-- Vector candidates: cosine distance over the HNSW index; score is the cosine similarity.
-- ef_search is read back inside the transaction so the response can show what was applied.
-- {filters} is a fragment compiled by cari.search.filters (parameterized).
SELECT c.id, 1 - (c.embedding <=> %(vector)s) AS score, current_setting('hnsw.ef_search') AS ef
FROM chunks AS c
WHERE c.collection_id = %(collection_id)s
  AND c.embedding IS NOT NULL
  {filters}
ORDER BY c.embedding <=> %(vector)s
LIMIT %(candidates)s;
