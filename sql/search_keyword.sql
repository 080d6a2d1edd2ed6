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
-- The field `filters` is empty or a WHERE on `heads.chunk_id` built from cari.search.filters
-- (parameterized). `postings_read` is the number of postings summed; `ceiling` what a chunk
-- holding every term very often would score, Σ weight · (k1 + 1), a fired rule's alternatives
-- all counted (cari.search.fusion.weighed weighs a short list's top score against it). `terms` and `summed` are
-- sql/fragments/search_keyword_terms.sql and _summed.sql (cari.search.bm25.statement).
WITH {terms}, {summed}
SELECT chunk_id, score, (SELECT sum(df) FROM terms) AS postings_read,
       (SELECT sum(weight) FROM terms) * (SELECT k1 + 1 FROM params) AS ceiling
FROM scored
WHERE score > 0  -- e.g. a title word when titles count for nothing
ORDER BY score DESC, chunk_id
LIMIT %(candidates)s;
