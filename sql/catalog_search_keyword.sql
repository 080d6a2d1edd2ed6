-- Keyword candidates for a catalog search: items sharing any of the query's lexemes (`query`,
-- the OR-ed tsquery from catalog_search_probe; through the GIN index on `tsv`), best ts_rank
-- first, plus every item whose SKU is one of the query's words. `name_lexemes` are the name's,
-- for the caller to tell how fully the query names the item.
WITH matches AS (
    SELECT id, row_number() OVER (ORDER BY ts_rank(tsv, %(query)s::tsquery) DESC, id) AS rank
    FROM catalog_items
    WHERE collection_id = %(collection_id)s AND tsv @@ %(query)s::tsquery
    ORDER BY rank
    LIMIT %(candidates)s
), exact AS (
    SELECT id, NULL::bigint AS rank
    FROM catalog_items
    WHERE collection_id = %(collection_id)s AND sku = ANY (%(words)s::text[])
)
SELECT i.sku, i.name, i.variant, i.price, i.currency, i.attributes, i.created_at, i.updated_at,
       tsvector_to_array(to_tsvector(i.language, i.name)) AS name_lexemes,
       min(m.rank) AS keyword_rank
FROM (SELECT id, rank FROM matches UNION ALL SELECT id, rank FROM exact) AS m
JOIN catalog_items AS i ON i.id = m.id
GROUP BY i.id
ORDER BY keyword_rank NULLS LAST, i.sku;
