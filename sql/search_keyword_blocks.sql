-- Keyword candidates scored by Okapi BM25, exactly, with the `cari_bm25` extension: the same
-- terms, weights and statistics as search_keyword.sql (the SQL engine and the tests' oracle),
-- then two disjoint sources of postings, each chunk's postings being in exactly one of them:
-- - the packed blocks, walked by `bm25_topk` in C with block-max pruning (exact top k), less
--   the chunks deleted or re-indexed since they were folded (`bm25_dead`), within the chunks
--   the filters allow (their ids computed first, `{allowed}`);
-- - the delta, the postings written since the last fold (`postings`), summed as the SQL
--   engine sums them ({filters} as there).
-- The best `candidates` of the two, by score then chunk id. `postings_read` is the number of
-- postings the query's lexemes have (an upper bound of those read).
WITH params AS (
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
), packed AS (
    SELECT r.chunk_id, r.score
    FROM (
        SELECT array_agg(lexeme ORDER BY lexeme) AS lexemes,
               array_agg(grp ORDER BY lexeme) AS groups,
               array_agg(alt ORDER BY lexeme) AS alts,
               array_agg(weight ORDER BY lexeme) AS weights
        FROM terms
    ) AS q
    CROSS JOIN params AS p
    CROSS JOIN totals AS a
    CROSS JOIN LATERAL bm25_topk(
        %(collection_id)s, q.lexemes, q.groups, q.alts, q.weights, a.avglen, p.k1, p.b,
        p.boost, %(candidates)s, {allowed},
        ARRAY(SELECT d.chunk_id FROM bm25_dead AS d
              WHERE d.collection_id = %(collection_id)s ORDER BY d.chunk_id)
    ) AS r
    WHERE q.lexemes IS NOT NULL
), parts AS NOT MATERIALIZED (
    SELECT heads.chunk_id, heads.grp, heads.alt, heads.part
    FROM (
        SELECT h.chunk_id, t.grp, t.alt,
               t.weight * bm25_tf(h.tf_title * p.boost + h.tf_body,
                               h.len_title * p.boost + h.len_body, a.avglen, p.k1, p.b) AS part
        FROM terms AS t
        CROSS JOIN params AS p
        CROSS JOIN totals AS a
        CROSS JOIN LATERAL (
            SELECT o.chunk_id, o.tf_title, o.tf_body, o.len_title, o.len_body
            FROM postings AS o
            WHERE o.collection_id = %(collection_id)s AND o.lexeme = t.lexeme
        ) AS h
    ) AS heads
    {filters}
), delta AS (
    SELECT s.chunk_id, sum(s.score) AS score
    FROM (
        SELECT chunk_id, part AS score FROM parts WHERE grp IS NULL
        UNION ALL
        SELECT a.chunk_id, max(a.score)  -- a fired rule: its best alternative
        FROM (
            SELECT chunk_id, grp, sum(part) AS score
            FROM parts WHERE grp IS NOT NULL
            GROUP BY chunk_id, grp, alt
        ) AS a
        GROUP BY a.chunk_id, a.grp
    ) AS s
    GROUP BY s.chunk_id
)
SELECT chunk_id, score, (SELECT sum(df) FROM terms) AS postings_read
FROM (
    SELECT chunk_id, score FROM packed
    UNION ALL
    SELECT chunk_id, score FROM delta WHERE score > 0
) AS found
ORDER BY score DESC, chunk_id
LIMIT %(candidates)s;
