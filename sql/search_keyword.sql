-- Keyword candidates scored by Okapi BM25, exactly: every posting of the query's lexemes is
-- read from `postings_lexeme_idx` (an index-only range per lexeme) and summed per chunk.
-- The query is analysed by each text-search configuration the collection's chunks use, less
-- that configuration's query stop words, plus the lexemes the collection's synonym rules add
-- (`query_expanded`, migrations 0007 to 0009), plus the known lexemes closest to the words
-- the collection does not know (`query_corrected`, migration 0011), each weighing its
-- `factor` (below 1) times what it would weigh as an exact match; a lexeme
-- the query says `qtf` times weighs qtf·(k3+1)/(k3+qtf) (Okapi's k3; 1 when said once); `N`,
-- the average length and each lexeme's `df` are the compacted statistics plus pending deltas,
-- all in this statement's snapshot. A title occurrence counts `title_boost` body occurrences.
-- A fired synonym rule (`grp`) scores in a chunk as the best of its alternatives (`alt`: the
-- query's own term, or one the rule adds), each scored as exact BM25 on its own statistics:
-- a chunk saying both "CRV" and "CR-V" counts once. Without a fired rule, the score is the
-- plain sum.
-- {filters} is empty or a WHERE on `heads.chunk_id` built from cari.search.filters
-- (parameterized). `postings_read` is the number of postings summed.
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
), parts AS NOT MATERIALIZED (  -- inlined in each branch below: postings read once
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
), scored AS (
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
FROM scored
WHERE score > 0  -- e.g. a title word when titles count for nothing
ORDER BY score DESC, chunk_id
LIMIT %(candidates)s;
