-- Store a chunk's vector.
UPDATE chunks SET embedding = %(embedding)s WHERE id = %(id)s;
