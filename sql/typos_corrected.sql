-- The corrections a query gets in each language of the collection (as keyword search sees
-- them: `query_corrected`, migration 0011): each unknown query lexeme, the known lexeme that
-- stands for it and what a match of it weighs against an exact one; for `explain`.
WITH languages AS (
    SELECT language FROM bm25_sizes WHERE collection_id = %(collection_id)s AND chunks > 0
    UNION
    SELECT language FROM bm25_pending_sizes WHERE collection_id = %(collection_id)s AND chunks > 0
    UNION
    SELECT language FROM collections WHERE id = %(collection_id)s
)
SELECT w.corrects, w.lexeme, l.language::text, w.factor
FROM languages AS l
CROSS JOIN LATERAL query_corrected(%(collection_id)s, l.language, %(query)s) AS w
WHERE w.corrects IS NOT NULL
ORDER BY w.corrects, l.language::text;
