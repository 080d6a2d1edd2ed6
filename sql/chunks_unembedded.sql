-- The next chunks stored without a vector, oldest first (partial index chunks_unembedded_idx),
-- with the embedder their collection names (NULL: the default one).
SELECT c.id, c.title, c.content, k.embedder
FROM chunks AS c JOIN collections AS k ON k.id = c.collection_id
WHERE c.embedding IS NULL
  AND c.id > %(after)s
  AND (%(collection_id)s::bigint IS NULL OR c.collection_id = %(collection_id)s)
ORDER BY c.id
LIMIT %(limit)s;
