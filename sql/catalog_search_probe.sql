-- Before a catalog search: whether the collection has any catalog item, and the query's lexemes
-- as the collection's language analyses them, OR-ed into a tsquery. Each lexeme is quoted
-- (quotes and backslashes doubled), so no input is a tsquery syntax error; NULL when there is
-- no lexeme. An empty catalog costs this one statement.
SELECT q.lexemes,
       (SELECT string_agg('''' || replace(replace(l, '\', '\\'), '''', '''''') || '''', ' | ')
        FROM unnest(q.lexemes) AS l) AS query,
       EXISTS (SELECT 1 FROM catalog_items AS i WHERE i.collection_id = c.id) AS stocked
FROM collections AS c
CROSS JOIN LATERAL (SELECT tsvector_to_array(to_tsvector(c.language, %(text)s)) AS lexemes) AS q
WHERE c.id = %(collection_id)s;
