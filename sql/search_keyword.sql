-- Keyword candidates scored by Okapi BM25, exact for the top %(exact)s: a threshold algorithm
-- over each query lexeme's postings, read best impact first, %(depth)s per lexeme (NULL: all).
--
-- A chunk seen in some lexemes' lists has an exact partial score (`lower`) and can gain at most
-- each unseen lexeme's `bound` (its idf times the last impact read, corrected for the drift of
-- the average length since impacts were computed), so `upper`. Chunks that could still reach
-- the top are scored exactly from their other postings; `proven` says whether a chunk never
-- seen could still beat the %(exact)s-th score (then the caller reads deeper).
-- Statistics are the compacted base plus pending deltas, all in this statement's snapshot.
-- {filters} is empty or a WHERE on `heads.chunk_id` built from cari.search.filters
-- (parameterized): chunks that fail it are dropped before the threshold is taken.
WITH params AS (
    SELECT c.bm25_k1 AS k1, c.bm25_b AS b, c.title_boost AS boost,
           coalesce(c.bm25_reference_length, 1) AS reference, c.language
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
    SELECT DISTINCT w.lexeme
    FROM (SELECT language FROM sizes WHERE chunks > 0 UNION SELECT language FROM params) AS l,
         unnest(to_tsvector(l.language, %(query)s)) AS w
), terms AS (
    SELECT w.lexeme, ln(1 + (t.n - d.df + 0.5) / (d.df + 0.5)) AS idf
    FROM words AS w
    CROSS JOIN totals AS t
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
), heads AS MATERIALIZED (
    SELECT t.lexeme, h.chunk_id, h.impact,
           t.idf * bm25_tf(h.tf_title * p.boost + h.tf_body, h.len_title * p.boost + h.len_body,
                           a.avglen, p.k1, p.b) AS part
    FROM terms AS t
    CROSS JOIN params AS p
    CROSS JOIN totals AS a
    CROSS JOIN LATERAL (
        SELECT o.chunk_id, o.impact, o.tf_title, o.tf_body, o.len_title, o.len_body
        FROM postings AS o
        WHERE o.collection_id = %(collection_id)s AND o.lexeme = t.lexeme
        ORDER BY o.impact DESC
        LIMIT %(depth)s
    ) AS h
), frontier AS (  -- the most an unread posting of each lexeme can add (0: list read to its end)
    SELECT t.lexeme,
           CASE WHEN %(depth)s::bigint IS NULL OR count(h.chunk_id) < %(depth)s::bigint THEN 0
                ELSE t.idf * min(h.impact) * greatest(1, a.avglen / p.reference)
           END AS bound
    FROM terms AS t
    LEFT JOIN heads AS h USING (lexeme)
    CROSS JOIN params AS p
    CROSS JOIN totals AS a
    GROUP BY t.lexeme, t.idf, a.avglen, p.reference
), seen AS (
    SELECT chunk_id, sum(part) AS lower, array_agg(lexeme) AS lexemes
    FROM heads
    {filters}
    GROUP BY chunk_id
), bounded AS (
    SELECT s.chunk_id, s.lower, s.lower + coalesce(sum(f.bound), 0) AS upper,
           array_agg(f.lexeme) FILTER (WHERE f.lexeme IS NOT NULL) AS missing
    FROM seen AS s
    LEFT JOIN frontier AS f ON f.bound > 0 AND f.lexeme <> ALL (s.lexemes)
    GROUP BY s.chunk_id, s.lower
), floor AS (  -- the %(exact)s-th best partial score: a lower bound of the final threshold
    SELECT coalesce(
        (SELECT lower FROM bounded ORDER BY lower DESC OFFSET %(exact)s - 1 LIMIT 1), 0
    ) AS lower
), complete AS MATERIALIZED (
    SELECT b.chunk_id, b.lower, b.missing
    FROM bounded AS b, floor AS f
    WHERE b.upper >= f.lower
    UNION
    (SELECT chunk_id, lower, missing FROM bounded ORDER BY lower DESC LIMIT %(candidates)s)
), scored AS (
    SELECT c.chunk_id, c.lower + coalesce(sum(t.idf * bm25_tf(
               o.tf_title * p.boost + o.tf_body, o.len_title * p.boost + o.len_body,
               a.avglen, p.k1, p.b)), 0) AS score
    FROM complete AS c
    CROSS JOIN params AS p
    CROSS JOIN totals AS a
    LEFT JOIN postings AS o ON o.chunk_id = c.chunk_id AND o.lexeme = ANY (c.missing)
    LEFT JOIN terms AS t ON t.lexeme = o.lexeme
    GROUP BY c.chunk_id, c.lower
), verdict AS (
    SELECT (SELECT coalesce(sum(bound), 0) FROM frontier) <= coalesce(
        (SELECT score FROM scored ORDER BY score DESC OFFSET %(exact)s - 1 LIMIT 1), 0
    ) AS proven
)
SELECT r.chunk_id, r.score, v.proven
FROM verdict AS v
LEFT JOIN LATERAL (
    SELECT chunk_id, score FROM scored
    WHERE score > 0  -- e.g. a title word when titles count for nothing
    ORDER BY score DESC, chunk_id
    LIMIT %(candidates)s
) AS r ON true
ORDER BY r.score DESC, r.chunk_id;
