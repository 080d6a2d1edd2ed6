-- Every collection's packed postings back into the delta, less the chunks dead in the blocks:
-- afterwards `postings` holds every posting, as the SQL statement (search_keyword.sql) reads.
-- Run before the extension is dropped (CARI_KEYWORD_ENGINE=sql), in the same transaction.
WITH packed AS (
    DELETE FROM bm25_blocks RETURNING collection_id, lexeme, data
), dead AS (
    DELETE FROM bm25_dead RETURNING collection_id, chunk_id
)
INSERT INTO postings (collection_id, lexeme, chunk_id, tf_title, tf_body, len_title, len_body)
SELECT p.collection_id, p.lexeme, u.chunk_id, u.tf_title, u.tf_body, u.len_title, u.len_body
FROM packed AS p
CROSS JOIN LATERAL bm25_unpack(p.data) AS u
WHERE NOT EXISTS (
    SELECT FROM dead AS d WHERE d.collection_id = p.collection_id AND d.chunk_id = u.chunk_id
);
