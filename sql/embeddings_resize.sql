-- The collections whose embedder %(embedder)s (NULL: the default one) now makes vectors of
-- another width than theirs: their vectors are emptied (a vector cannot be converted to another
-- model's) and wait for `cari reembed`, and the collection records the new width.
WITH resized AS (
    UPDATE collections SET dimensions = %(dimension)s, updated_at = now()
    WHERE embedder IS NOT DISTINCT FROM %(embedder)s AND dimensions <> %(dimension)s
    RETURNING id
), emptied_chunks AS (
    UPDATE chunks SET embedding = NULL, next_embedding = NULL
    WHERE collection_id IN (SELECT id FROM resized)
), emptied_catalog AS (
    UPDATE catalog_items SET embedding = NULL, next_embedding = NULL
    WHERE collection_id IN (SELECT id FROM resized)
)
SELECT count(*) FROM resized;
