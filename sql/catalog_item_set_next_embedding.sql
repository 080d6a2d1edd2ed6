-- Store a catalog item's vector from the embedder its collection is being moved to.
UPDATE catalog_items SET next_embedding = %(embedding)s WHERE id = %(id)s;
