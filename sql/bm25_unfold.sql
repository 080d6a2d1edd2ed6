-- Every collection's packed postings and chunk delta back into posting rows, less the chunks
-- dead in the blocks: afterwards `postings` holds every posting, as the SQL statement
-- (search_keyword.sql) reads. Run before the extension is dropped (CARI_KEYWORD_ENGINE=sql), in
-- the same transaction, after bm25_unfold_lock.sql.
WITH packed AS (
    DELETE FROM bm25_blocks RETURNING collection_id, lexeme, data
), dead AS (
    DELETE FROM bm25_dead RETURNING collection_id, chunk_id
), queued AS (
    DELETE FROM bm25_delta RETURNING collection_id, chunk_id
), terms AS (
    SELECT q.collection_id, q.chunk_id, u.lexeme,
           cardinality(array_positions(u.weights, 'A')) AS tf_title,
           cardinality(u.weights) - cardinality(array_positions(u.weights, 'A')) AS tf_body
    FROM queued AS q
    JOIN chunks AS ch ON ch.id = q.chunk_id
    CROSS JOIN LATERAL unnest(ch.tsv) AS u
), unqueued AS (
    INSERT INTO postings (collection_id, lexeme, chunk_id, tf_title, tf_body, len_title,
                          len_body)
    SELECT t.collection_id, t.lexeme, t.chunk_id, t.tf_title, t.tf_body,
           sum(t.tf_title) OVER w, sum(t.tf_body) OVER w
    FROM terms AS t
    WINDOW w AS (PARTITION BY t.chunk_id)
)
INSERT INTO postings (collection_id, lexeme, chunk_id, tf_title, tf_body, len_title, len_body)
SELECT p.collection_id, p.lexeme, u.chunk_id, u.tf_title, u.tf_body, u.len_title, u.len_body
FROM packed AS p
CROSS JOIN LATERAL bm25_unpack(p.data) AS u
WHERE NOT EXISTS (
    SELECT FROM dead AS d WHERE d.collection_id = p.collection_id AND d.chunk_id = u.chunk_id
);
