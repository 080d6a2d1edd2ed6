-- Chunks of a collection to draw pseudo-questions from (cari.search.fit): a random sample of
-- those with a vector of the collection's width, so the probes search what searches search.
SELECT title, content
FROM chunks
WHERE collection_id = %(collection_id)s AND vector_dims(embedding) = %(dimension)s
ORDER BY random()
LIMIT %(sample)s;
