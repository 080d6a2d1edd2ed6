-- Keyword candidates scored by Okapi BM25; the first %(exact)s are exactly BM25's top.
--
-- Usually every posting of the query lexemes is summed (`scan`): that is the cheapest exact
-- plan unless one lexeme's list is long (over %(scan_limit)s postings in all) and the others'
-- short (%(scan_limit)s at most together), as in a rare word beside a very common one. Then the
-- statement prunes over impact-ordered postings (a threshold algorithm), never approximating:
-- 1. heads: the best %(depth)s postings of each query lexeme (NULL: all of them). A lexeme's
--    `frontier` is the last impact read (0 once its list is read to the end), widened by the
--    drift of the average length since impacts were stored;
-- 2. seed: the chunks with the best partial scores are scored exactly (index probes on
--    (chunk_id, lexeme)); the %(exact)s-th of those scores, `theta`, is a lower bound of the true
--    %(exact)s-th score;
-- 3. a chunk seen in no list can score at most Σ idf·frontier. When that exceeds theta, every
--    list is read further, down to its frontier scaled by theta / Σ idf·frontier: then a chunk
--    never seen scores at most theta and cannot enter the top;
-- 4. chunks seen whose partial score plus what their unseen lexemes could add (`upper`) reaches
--    the threshold are scored exactly, and join the seed chunks (one may score exactly theta).
-- Statistics are the compacted base plus pending deltas, all in this statement's snapshot.
-- {filters} is empty or a WHERE on `heads.chunk_id` built from cari.search.filters
-- (parameterized): chunks that fail it never count, not even for theta.
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
    SELECT sum(s.chunks) AS n, sum(s.length) / nullif(sum(s.chunks), 0) AS avglen,
           greatest(1, sum(s.length) / nullif(sum(s.chunks), 0) / min(p.reference)) AS drift
    FROM sizes AS s, params AS p
), words AS (  -- the query analysed as each language of the collection analyses its text
    SELECT DISTINCT w.lexeme
    FROM (SELECT language FROM sizes WHERE chunks > 0 UNION SELECT language FROM params) AS l,
         unnest(to_tsvector(l.language, %(query)s)) AS w
), terms AS MATERIALIZED (
    SELECT w.lexeme, d.df, ln(1 + (t.n - d.df + 0.5) / (d.df + 0.5)) AS idf
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
), route AS (  -- prune only where it pays: one long list beside short ones
    SELECT coalesce(
        %(prune)s::boolean,  -- set: forced (benchmarks and tests compare the two plans)
        coalesce(sum(df), 0) > %(scan_limit)s AND coalesce(sum(df) - max(df), 0) <= %(scan_limit)s
    ) AS prune
    FROM terms
), scan AS (  -- summing every posting is cheaper than pruning when none dominates
    SELECT heads.chunk_id, sum(heads.part) AS score, (SELECT sum(df) FROM terms) AS postings
    FROM (
        SELECT h.chunk_id,
               t.idf * bm25_tf(h.tf_title * p.boost + h.tf_body,
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
    GROUP BY heads.chunk_id
), first AS MATERIALIZED (
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
), frontier AS (
    SELECT t.lexeme, t.idf,
           CASE WHEN %(depth)s::bigint IS NULL OR count(h.chunk_id) < %(depth)s::bigint THEN 0
                ELSE min(h.impact)
           END AS impact
    FROM terms AS t
    LEFT JOIN first AS h USING (lexeme)
    GROUP BY t.lexeme, t.idf
), seed AS (  -- the most promising chunks, by their partial scores
    SELECT chunk_id FROM first AS heads
    {filters}
    GROUP BY chunk_id
    ORDER BY sum(part) DESC
    LIMIT 2 * %(exact)s
), seed_scores AS MATERIALIZED (
    SELECT s.chunk_id, e.score
    FROM seed AS s
    CROSS JOIN params AS p
    CROSS JOIN totals AS a
    CROSS JOIN LATERAL (
        SELECT sum(t.idf * bm25_tf(o.tf_title * p.boost + o.tf_body,
                                   o.len_title * p.boost + o.len_body, a.avglen, p.k1, p.b))
               AS score
        FROM postings AS o
        JOIN terms AS t ON t.lexeme = o.lexeme
        WHERE o.chunk_id = s.chunk_id AND o.lexeme = ANY (ARRAY(SELECT lexeme FROM terms))
    ) AS e
), theta AS (
    SELECT coalesce(
        (SELECT score FROM seed_scores ORDER BY score DESC OFFSET %(exact)s - 1 LIMIT 1), 0
    ) AS value
), plan AS (  -- how far to read each list: down to impact `tau`; `cap` bounds the rest
    SELECT f.lexeme, f.idf, f.impact * x.scale AS tau,
           f.idf * f.impact * x.scale * a.drift AS cap
    FROM frontier AS f
    CROSS JOIN totals AS a
    CROSS JOIN LATERAL (
        SELECT least(1, th.value / nullif(sum(g.idf * g.impact) * a.drift, 0)) AS scale
        FROM frontier AS g, theta AS th
        GROUP BY th.value
    ) AS x
), heads AS MATERIALIZED (
    SELECT lexeme, chunk_id, part FROM first
    UNION ALL
    SELECT l.lexeme, h.chunk_id,
           l.idf * bm25_tf(h.tf_title * p.boost + h.tf_body, h.len_title * p.boost + h.len_body,
                           a.avglen, p.k1, p.b)
    FROM plan AS l
    CROSS JOIN params AS p
    CROSS JOIN totals AS a
    CROSS JOIN LATERAL (
        SELECT o.chunk_id, o.impact, o.tf_title, o.tf_body, o.len_title, o.len_body
        FROM postings AS o
        WHERE o.collection_id = %(collection_id)s AND o.lexeme = l.lexeme AND o.impact >= l.tau
        ORDER BY o.impact DESC
        OFFSET %(depth)s  -- the first read; all of them are at or above the frontier >= tau
    ) AS h
    WHERE l.tau < (SELECT impact FROM frontier WHERE lexeme = l.lexeme)  -- more to read
), seen AS (
    SELECT chunk_id, sum(part) AS lower, array_agg(lexeme) AS lexemes
    FROM heads
    {filters}
    GROUP BY chunk_id
), bounded AS (
    SELECT s.chunk_id, s.lower, s.lower + coalesce(m.cap, 0) AS upper, m.missing
    FROM seen AS s
    CROSS JOIN LATERAL (
        SELECT sum(l.cap) AS cap, array_agg(l.lexeme) AS missing
        FROM plan AS l
        WHERE l.cap > 0 AND l.lexeme <> ALL (s.lexemes)
    ) AS m
), floor AS (  -- the best lower bound of the %(exact)s-th score
    SELECT greatest(
        (SELECT value FROM theta),
        (SELECT lower FROM bounded ORDER BY lower DESC OFFSET %(exact)s - 1 LIMIT 1)
    ) AS lower
), complete AS MATERIALIZED (
    SELECT b.chunk_id, b.lower, b.missing
    FROM bounded AS b, floor AS f
    WHERE b.upper >= f.lower
    UNION
    (SELECT chunk_id, lower, missing FROM bounded ORDER BY lower DESC LIMIT %(candidates)s)
), scored AS (
    SELECT c.chunk_id, c.lower + coalesce(m.part, 0) AS score
    FROM complete AS c
    CROSS JOIN params AS p
    CROSS JOIN totals AS a
    CROSS JOIN LATERAL (
        SELECT sum(t.idf * bm25_tf(o.tf_title * p.boost + o.tf_body,
                                   o.len_title * p.boost + o.len_body, a.avglen, p.k1, p.b))
               AS part
        FROM postings AS o
        JOIN terms AS t ON t.lexeme = o.lexeme
        WHERE o.chunk_id = c.chunk_id AND o.lexeme = ANY (c.missing)
    ) AS m
)
SELECT chunk_id, score, postings AS postings_read
FROM scan
WHERE NOT (SELECT prune FROM route)
  AND score > 0  -- e.g. a title word when titles count for nothing
UNION ALL
SELECT chunk_id, score, (SELECT count(*) FROM heads)
FROM (  -- with the seed chunks, one of which may score exactly theta
    SELECT * FROM scored
    UNION ALL
    SELECT * FROM seed_scores AS s WHERE NOT EXISTS (SELECT FROM scored WHERE chunk_id = s.chunk_id)
) AS found
WHERE (SELECT prune FROM route) AND score > 0
ORDER BY score DESC, chunk_id
LIMIT %(candidates)s;
