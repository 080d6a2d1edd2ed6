-- A question's lexemes, read once per search (cari.search.lexemes) and handed to keyword search,
-- the relevance evidence and the highlights, which read them alike: the question analysed as
-- each language of the collection analyses its text (each language its chunks hold, and the
-- collection's own), stop words dropped, fired synonym rules and typo corrections included
-- (`query_corrected`). Each of the three analysed the question itself before, ~0.5 ms of
-- PostgreSQL each for a question of 10 words. Its last rows, lexeme NULL, are the words the
-- vector side respells (`typed`, `word`) in the collection's own language (migration 0023): the
-- same corrections, found once for both sides.
SELECT l.language::oid AS language, w.lexeme, w.qtf, w.grp, w.alt, w.factor, w.typed, w.word
FROM collections AS c
CROSS JOIN LATERAL (
    SELECT s.language FROM (
        SELECT language, chunks FROM bm25_sizes WHERE collection_id = c.id
        UNION ALL
        SELECT language, chunks FROM bm25_pending_sizes WHERE collection_id = c.id
    ) AS s
    GROUP BY s.language
    HAVING sum(s.chunks) > 0
    UNION
    SELECT c.language
) AS l
CROSS JOIN LATERAL query_corrected(c.id, l.language, %(query)s) AS w
WHERE c.id = %(collection_id)s
  AND (w.lexeme IS NOT NULL OR l.language = c.language)
ORDER BY w.lexeme IS NULL, 1, 2, w.typed;
