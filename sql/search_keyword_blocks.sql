-- Keyword candidates scored by Okapi BM25, exactly, with the `cari_bm25` extension: the same
-- terms, weights and statistics as search_keyword.sql (the SQL engine and the tests' oracle),
-- then two disjoint sources of postings, each chunk's postings being in exactly one of them:
-- - the packed blocks, walked by `bm25_topk` in C with block-max pruning (exact top k), less
--   the chunks deleted or re-indexed since they were folded (`bm25_dead`), within the chunks
--   the filters allow (their ids computed first, the field `allowed`);
-- - the delta, the postings written since the last fold (`postings`), summed as the SQL
--   engine sums them (`summed`, with `filters` as there).
-- The fields `terms` and `summed` are sql/fragments/search_keyword_terms.sql and _summed.sql
-- (cari.search.bm25.statement). The best `candidates` of the two, by score then chunk id.
-- `postings_read` is the number of postings the query's lexemes have (an upper bound of those
-- read).
WITH {terms}, packed AS (
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
), {summed}
SELECT chunk_id, score, (SELECT sum(df) FROM terms) AS postings_read
FROM (
    SELECT chunk_id, score FROM packed
    UNION ALL
    SELECT chunk_id, score FROM scored WHERE score > 0
) AS found
ORDER BY score DESC, chunk_id
LIMIT %(candidates)s;
