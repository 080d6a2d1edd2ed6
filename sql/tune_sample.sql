-- Chunks of a collection to make questions of (cari.tune.ef_search): drawn by a hash of their
-- ids and the seed, so a draw is repeatable and another seed draws another set; only those with
-- a vector of the collection's width and within the filters ({filters}: a fragment compiled by
-- cari.search.filters, parameterized).
SELECT c.title, c.content
FROM chunks AS c
WHERE c.collection_id = %(collection_id)s
  AND vector_dims(c.embedding) = %(dimension)s
  {filters}
ORDER BY hashint8(c.id # %(seed)s), c.id
LIMIT %(sample)s;
