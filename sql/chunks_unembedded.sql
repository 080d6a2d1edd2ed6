-- The next chunks stored without a vector, oldest first (partial index chunks_unembedded_idx).
SELECT id, title, content
FROM chunks
WHERE embedding IS NULL
  AND id > %(after)s
  AND (%(collection_id)s::bigint IS NULL OR collection_id = %(collection_id)s)
ORDER BY id
LIMIT %(limit)s;
