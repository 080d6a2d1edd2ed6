-- Start (or resume) moving a collection to the embedder %(target)s: its vectors fill
-- chunks.next_embedding and catalog_items.next_embedding while searches keep using `embedding`.
-- A move to another target than the one under way starts over. Returns the collection's id.
WITH old AS (
    SELECT id, next_embedder FROM collections WHERE name = %(name)s FOR UPDATE
), started AS (
    UPDATE collections AS c SET next_embedder = %(target)s, updated_at = now()
    FROM old WHERE c.id = old.id
    RETURNING c.id, old.next_embedder IS DISTINCT FROM %(target)s AS restarted
), cleared_chunks AS (
    UPDATE chunks SET next_embedding = NULL
    WHERE collection_id IN (SELECT id FROM started WHERE restarted) AND next_embedding IS NOT NULL
), cleared_catalog AS (
    UPDATE catalog_items SET next_embedding = NULL
    WHERE collection_id IN (SELECT id FROM started WHERE restarted) AND next_embedding IS NOT NULL
)
SELECT id FROM started;
