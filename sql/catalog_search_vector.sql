-- Vector candidates for a catalog search: cosine distance over the HNSW index of the
-- collection's width, nearest first; `cosine` is the similarity. `name_lexemes` as in
-- catalog_search_keyword; {indexed}, {type} and {dimension} as in search_vector.
SELECT i.sku, i.name, i.variant, i.price, i.currency, i.attributes, i.created_at, i.updated_at,
       tsvector_to_array(to_tsvector(i.language, i.name)) AS name_lexemes,
       1 - ({indexed} <=> %(vector)s::{type}) AS cosine
FROM catalog_items AS i
WHERE i.collection_id = %(collection_id)s AND vector_dims(i.embedding) = {dimension}
ORDER BY {indexed} <=> %(vector)s::{type}
LIMIT %(candidates)s;
