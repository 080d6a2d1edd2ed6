-- Whether a collection other than %(collection_id)s stores chunks of the width %(dimension)s
-- (collections.dimensions: the width of its vectors, checked at start-up). A bulk load drops
-- the width's HNSW index only when none does: their searches would lose the index meanwhile.
SELECT EXISTS (
    SELECT FROM collections AS o
    WHERE o.id <> %(collection_id)s
      AND o.dimensions = %(dimension)s
      AND EXISTS (SELECT FROM chunks AS c WHERE c.collection_id = o.id)
);
