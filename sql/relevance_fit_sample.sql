-- Chunks of a collection to draw pseudo-questions from (cari.search.fit): a sample of those
-- with a vector of the collection's width, so the probes search what searches search. The
-- draw is the chunks first by a hash of their ids: as good as random for the sample, and the
-- same each time, so that a collection fitted again without a change gets the same scale (a
-- random draw moved a 4,692-chunk collection's floor by up to 0.022 between fits). The draw
-- reads ids only (the collection's index); the text and vector of the few drawn.
WITH drawn AS (
    SELECT id FROM chunks
    WHERE collection_id = %(collection_id)s
    ORDER BY hashint8(id), id
    LIMIT 4 * %(sample)s
)
SELECT c.title, c.content
FROM chunks AS c JOIN drawn USING (id)
WHERE vector_dims(c.embedding) = %(dimension)s
ORDER BY hashint8(c.id), c.id
LIMIT %(sample)s;
