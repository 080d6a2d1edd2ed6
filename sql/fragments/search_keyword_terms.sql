-- Fragment (not a statement) of search_keyword.sql and search_keyword_blocks.sql, composed by
-- cari.search.bm25.statement: the query's terms, each with its df and weight (idf times its
-- weight in the query), and the collection's parameters and sizes, as CTEs.
params AS (
    SELECT c.bm25_k1 AS k1, c.bm25_b AS b, c.bm25_k3 AS k3, c.title_boost AS boost, c.language
    FROM collections AS c
    WHERE c.id = %(collection_id)s
), sizes AS (
    SELECT s.language, sum(s.chunks) AS chunks,
           sum(s.length_title * p.boost + s.length_body) AS length
    FROM (
        SELECT language, chunks, length_title, length_body
        FROM bm25_sizes WHERE collection_id = %(collection_id)s
        UNION ALL
        SELECT language, chunks, length_title, length_body
        FROM bm25_pending_sizes WHERE collection_id = %(collection_id)s
    ) AS s, params AS p
    GROUP BY s.language
), totals AS (
    SELECT sum(chunks) AS n, sum(length) / nullif(sum(chunks), 0) AS avglen
    FROM sizes
), words AS (  -- the query analysed as each language of the collection analyses its text
    SELECT w.lexeme, max(w.qtf) AS qtf, min(w.grp) AS grp, min(w.alt) AS alt,
           max(w.factor) AS factor
    FROM (SELECT language FROM sizes WHERE chunks > 0 UNION SELECT language FROM params) AS l,
         query_corrected(%(collection_id)s, l.language, %(query)s) AS w
    GROUP BY w.lexeme
), terms AS (  -- weight: the lexeme's idf times its weight in the query
    SELECT w.lexeme, w.grp, w.alt, d.df,
           ln(1 + (t.n - d.df + 0.5) / (d.df + 0.5)) * bm25_query_weight(w.qtf, p.k3) * w.factor
               AS weight
    FROM words AS w
    CROSS JOIN totals AS t
    CROSS JOIN params AS p
    CROSS JOIN LATERAL (
        SELECT sum(df) AS df FROM (
            SELECT df FROM bm25_terms
            WHERE collection_id = %(collection_id)s AND lexeme = w.lexeme
            UNION ALL
            SELECT df FROM bm25_pending_terms
            WHERE collection_id = %(collection_id)s AND lexeme = w.lexeme
        ) AS s
    ) AS d
    WHERE d.df > 0
)
