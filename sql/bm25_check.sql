-- Recount a collection's BM25 postings and statistics from its chunks and count what differs
-- from the stored ones: one row per kind, all zeros when everything is exact. The stored
-- postings are the delta's and, with the extension, the packed blocks' less the dead chunks;
-- a block that does not decode is an error naming it.
WITH target AS (
    SELECT id
    FROM collections WHERE name = %(name)s
), counted AS (
    SELECT ch.id AS chunk_id, u.lexeme,
           cardinality(array_positions(u.weights, 'A')) AS tf_title,
           cardinality(u.weights) - cardinality(array_positions(u.weights, 'A')) AS tf_body
    FROM target AS t
    JOIN chunks AS ch ON ch.collection_id = t.id
    CROSS JOIN LATERAL unnest(ch.tsv) AS u
), lengths AS (
    SELECT ch.id AS chunk_id, ch.language,
           coalesce(sum(c.tf_title), 0) AS len_title, coalesce(sum(c.tf_body), 0) AS len_body
    FROM target AS t
    JOIN chunks AS ch ON ch.collection_id = t.id
    LEFT JOIN counted AS c ON c.chunk_id = ch.id
    GROUP BY ch.id, ch.language
), expected_postings AS (
    SELECT c.chunk_id, c.lexeme, c.tf_title, c.tf_body, l.len_title, l.len_body
    FROM counted AS c JOIN lengths AS l USING (chunk_id)
), stored_postings AS (
    SELECT p.chunk_id, p.lexeme, p.tf_title, p.tf_body, p.len_title, p.len_body
    FROM target AS t CROSS JOIN LATERAL bm25_stored_postings(t.id) AS p
), expected_terms AS (
    SELECT lexeme, count(*) AS df FROM counted GROUP BY lexeme
), stored_terms AS (
    SELECT s.lexeme, sum(s.df) AS df
    FROM target AS t
    JOIN (
        SELECT collection_id, lexeme, df FROM bm25_terms
        UNION ALL
        SELECT collection_id, lexeme, df FROM bm25_pending_terms
    ) AS s ON s.collection_id = t.id
    GROUP BY s.lexeme
    HAVING sum(s.df) <> 0
), expected_sizes AS (
    SELECT language, count(*) AS chunks, sum(len_title) AS length_title,
           sum(len_body) AS length_body
    FROM lengths GROUP BY language
), stored_sizes AS (
    SELECT s.language, sum(s.chunks) AS chunks, sum(s.length_title) AS length_title,
           sum(s.length_body) AS length_body
    FROM target AS t
    JOIN (
        SELECT collection_id, language, chunks, length_title, length_body FROM bm25_sizes
        UNION ALL
        SELECT collection_id, language, chunks, length_title, length_body
        FROM bm25_pending_sizes
    ) AS s ON s.collection_id = t.id
    GROUP BY s.language
    HAVING sum(s.chunks) <> 0
)
SELECT 'postings' AS kind, count(*) AS differences FROM (
    (SELECT * FROM expected_postings EXCEPT ALL SELECT * FROM stored_postings)
    UNION ALL
    (SELECT * FROM stored_postings EXCEPT ALL SELECT * FROM expected_postings)
) AS d
UNION ALL
SELECT 'document frequencies', count(*)
FROM expected_terms AS e FULL JOIN stored_terms AS s USING (lexeme)
WHERE e.df IS DISTINCT FROM s.df
UNION ALL
SELECT 'sizes', count(*)
FROM expected_sizes AS e FULL JOIN stored_sizes AS s USING (language)
WHERE (e.chunks, e.length_title, e.length_body)
      IS DISTINCT FROM (s.chunks, s.length_title, s.length_body);
