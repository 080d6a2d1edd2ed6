-- Store a chunk's vector from the embedder its collection is being moved to.
UPDATE chunks SET next_embedding = %(embedding)s WHERE id = %(id)s;
