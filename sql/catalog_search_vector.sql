-- Vector candidates for a catalog search: cosine distance over the HNSW index, nearest first;
-- `cosine` is the similarity. `name_lexemes` as in catalog_search_keyword.
SELECT i.sku, i.name, i.variant, i.price, i.currency, i.attributes, i.created_at, i.updated_at,
       tsvector_to_array(to_tsvector(i.language, i.name)) AS name_lexemes,
       1 - (i.embedding <=> %(vector)s) AS cosine
FROM catalog_items AS i
WHERE i.collection_id = %(collection_id)s AND i.embedding IS NOT NULL
ORDER BY i.embedding <=> %(vector)s
LIMIT %(candidates)s;
