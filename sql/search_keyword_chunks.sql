-- Keyword candidates scored by Okapi BM25, exactly, from the chunks' own tsvectors: what a
-- search answers when a block that search_keyword_blocks.sql walks is damaged
-- (cari.search.bm25). Every chunk of the collection holding one of the query's lexemes (found
-- by `chunks_tsv_idx`) gives its postings of them as a fold packs them (`bm25_tsv_postings`,
-- the CTE `unfolded`), scored and summed with the same terms, weights and statistics
-- (sql/fragments/search_keyword_terms.sql and _summed.sql). Neither the blocks, nor the chunk
-- delta, nor posting rows are read, so the scores are the walk's whatever state they are in;
-- it reads every chunk holding a query word, so it is slower than the walk for common words.
-- `postings_read` is the number of postings the query's lexemes have; `ceiling` as
-- search_keyword.sql's.
WITH {terms}, unfolded AS MATERIALIZED (
    SELECT ch.id AS chunk_id, m.lexeme, m.tf_title, m.tf_body, m.len_title, m.len_body
    FROM chunks AS ch
    CROSS JOIN LATERAL bm25_tsv_postings(ch.tsv, (SELECT array_agg(lexeme) FROM terms)) AS m
    WHERE ch.collection_id = %(collection_id)s
      AND ch.tsv @@ (  -- any of the lexemes, each quoted as a one-lexeme tsquery
          SELECT string_agg(
                     '''' || replace(replace(lexeme, '\', '\\'), '''', '''''') || '''', ' | '
                 )::tsquery
          FROM terms
      )
), {summed}
SELECT chunk_id, score, (SELECT sum(df) FROM terms) AS postings_read,
       (SELECT sum(weight) FROM terms) * (SELECT k1 + 1 FROM params) AS ceiling
FROM scored
WHERE score > 0
ORDER BY score DESC, chunk_id
LIMIT %(candidates)s;
