-- Store a collection's fitted relevance scale (NULL: too few chunks to fit one).
UPDATE collections SET relevance_fit = %(fit)s WHERE id = %(id)s;
