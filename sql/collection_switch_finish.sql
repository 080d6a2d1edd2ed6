-- Finish moving a collection to the embedder %(target)s, in one transaction: the new vectors
-- replace the old ones and the collection names its new embedder and width, so a search sees
-- either the old model throughout or the new one. A chunk written since the last pass has no
-- new vector: its `embedding` becomes NULL and the server's re-embedding fills it in. Nothing
-- happens if another move replaced this one meanwhile (0 rows).
WITH switched AS (
    UPDATE collections
    SET embedder = next_embedder, next_embedder = NULL, dimensions = %(dimensions)s,
        updated_at = now()
    WHERE id = %(collection_id)s AND next_embedder = %(target)s
    RETURNING id
), moved_chunks AS (
    UPDATE chunks SET embedding = next_embedding, next_embedding = NULL
    WHERE collection_id IN (SELECT id FROM switched)
), moved_catalog AS (
    UPDATE catalog_items SET embedding = next_embedding, next_embedding = NULL
    WHERE collection_id IN (SELECT id FROM switched)
)
SELECT count(*) FROM switched;
