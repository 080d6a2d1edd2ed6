-- Fragment (not a statement) of search_keyword.sql and search_keyword_blocks.sql, composed by
-- cari.search.bm25.statement: the query's terms, each with its df and weight (idf times its
-- weight in the query), and the collection's parameters and sizes, as CTEs. The question's
-- lexemes are parameters, as query_lexemes.sql read them (cari.search.lexemes).
params AS (
    SELECT c.bm25_k1 AS k1, c.bm25_b AS b, c.bm25_k3 AS k3, c.title_boost AS boost
    FROM collections AS c
    WHERE c.id = %(collection_id)s
), totals AS (  -- the collection's chunks and their mean length, title words boosted
    SELECT sum(s.chunks) AS n,
           sum(s.length_title * p.boost + s.length_body) / nullif(sum(s.chunks), 0) AS avglen
    FROM (
        SELECT chunks, length_title, length_body
        FROM bm25_sizes WHERE collection_id = %(collection_id)s
        UNION ALL
        SELECT chunks, length_title, length_body
        FROM bm25_pending_sizes WHERE collection_id = %(collection_id)s
    ) AS s, params AS p
), words AS (  -- the question's lexemes in every language of the collection, as one set
    SELECT w.lexeme, max(w.qtf) AS qtf, min(w.grp) AS grp, min(w.alt) AS alt,
           max(w.factor) AS factor
    FROM unnest(%(lexemes)s::text[], %(qtfs)s::integer[], %(groups)s::integer[],
                %(alts)s::integer[], %(factors)s::double precision[])
         AS w(lexeme, qtf, grp, alt, factor)
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
