-- The synonym rules a query fires in each language of the collection (as keyword search
-- expands it: `query_expanded`), with the query's lexemes that fired each and the lexemes
-- each adds; for `explain`.
WITH languages AS (
    SELECT language FROM bm25_sizes WHERE collection_id = %(collection_id)s AND chunks > 0
    UNION
    SELECT language FROM bm25_pending_sizes WHERE collection_id = %(collection_id)s AND chunks > 0
    UNION
    SELECT language FROM collections WHERE id = %(collection_id)s
)
SELECT r.rule, l.language::text,
       array_agg(w.lexeme ORDER BY w.lexeme) FILTER (WHERE w.alt = 0) AS matched,
       array_agg(w.lexeme ORDER BY w.alt, w.lexeme) FILTER (WHERE w.alt > 0) AS added
FROM languages AS l
CROSS JOIN LATERAL query_expanded(%(collection_id)s, l.language, %(query)s) AS w
JOIN synonym_rules AS r ON r.collection_id = %(collection_id)s AND r.position = w.grp
GROUP BY r.position, r.rule, l.language
ORDER BY r.position, l.language::text;
