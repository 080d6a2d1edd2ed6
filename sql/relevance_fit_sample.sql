-- Chunks of a collection to draw pseudo-questions from (cari.search.fit): a random sample of
-- those with a vector of the collection's width, so the probes search what searches search.
-- The draw reads ids only (the collection's index); the text and vector of the few drawn.
WITH drawn AS (
    SELECT id FROM chunks
    WHERE collection_id = %(collection_id)s
    ORDER BY random()
    LIMIT 4 * %(sample)s
)
SELECT c.title, c.content
FROM chunks AS c JOIN drawn USING (id)
WHERE vector_dims(c.embedding) = %(dimension)s
LIMIT %(sample)s;
