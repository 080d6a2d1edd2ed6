-- The next chunks of a collection being moved to another embedder that lack its vector.
SELECT id, title, content
FROM chunks
WHERE collection_id = %(collection_id)s AND next_embedding IS NULL AND id > %(after)s
ORDER BY id
LIMIT %(limit)s;
