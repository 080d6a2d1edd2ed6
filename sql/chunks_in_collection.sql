-- The next chunks of a collection, for re-embedding all of it after a model change.
SELECT id, title, content
FROM chunks
WHERE collection_id = %(collection_id)s AND id > %(after)s
ORDER BY id
LIMIT %(limit)s;
