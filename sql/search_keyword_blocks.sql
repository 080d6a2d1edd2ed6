-- Keyword candidates scored by Okapi BM25, exactly, with the `cari_bm25` extension: the same
-- terms, weights and statistics as search_keyword.sql (the SQL engine and the tests' oracle),
-- then two disjoint sources of postings, each chunk's postings being in exactly one of them:
-- - the packed blocks, walked by `bm25_topk` in C with block-max pruning (exact top k), less
--   the chunks deleted or re-indexed since they were folded (`bm25_dead`), within the chunks
--   the filters allow (their ids computed first, the field `allowed`);
-- - the delta, the postings written since the last fold, summed as the SQL engine sums them
--   (`summed`, with `filters` as there): the chunks of `bm25_delta` (one row per chunk), their
--   postings of the query's lexemes read from their own tsvectors by `bm25_tsv_postings`
--   (`unfolded`), and posting rows of `postings` (written before the extension was created).
-- The fields `terms` and `summed` are sql/fragments/search_keyword_terms.sql and _summed.sql
-- (cari.search.bm25.statement). The best `candidates` of the two, by score then chunk id.
-- `postings_read` is the number of postings the query's lexemes have (an upper bound of those
-- read); `ceiling` as search_keyword.sql's.
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
), unfolded AS MATERIALIZED (
    SELECT d.chunk_id, m.lexeme, m.tf_title, m.tf_body, m.len_title, m.len_body
    FROM bm25_delta AS d
    JOIN chunks AS ch ON ch.id = d.chunk_id
    CROSS JOIN LATERAL bm25_tsv_postings(ch.tsv, (SELECT array_agg(lexeme) FROM terms)) AS m
    WHERE d.collection_id = %(collection_id)s
), {summed}
SELECT chunk_id, score, (SELECT sum(df) FROM terms) AS postings_read,
       (SELECT sum(weight) FROM terms) * (SELECT k1 + 1 FROM params) AS ceiling
FROM (
    SELECT chunk_id, score FROM packed
    UNION ALL
    SELECT chunk_id, score FROM scored WHERE score > 0
) AS found
ORDER BY score DESC, chunk_id
LIMIT %(candidates)s;
