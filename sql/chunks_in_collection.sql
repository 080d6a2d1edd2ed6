-- The next chunks of a collection, for re-embedding all of it after a model change, with the
-- embedder the collection names (NULL: the default one).
SELECT c.id, c.title, c.content, k.embedder
FROM chunks AS c JOIN collections AS k ON k.id = c.collection_id
WHERE c.collection_id = %(collection_id)s AND c.id > %(after)s
ORDER BY c.id
LIMIT %(limit)s;
