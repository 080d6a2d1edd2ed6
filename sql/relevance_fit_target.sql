-- The collection a relevance fit is for: its id, its embedder (NULL: the default one), its
-- chunk count, from the BM25 statistics (compacted plus pending), not a count of its rows, and
-- the chunk count of its last fit (NULL: none).
SELECT k.id, k.embedder, coalesce((
           SELECT sum(chunks) FROM bm25_sizes WHERE collection_id = k.id
       ), 0) + coalesce((
           SELECT sum(chunks) FROM bm25_pending_sizes WHERE collection_id = k.id
       ), 0) AS chunks,
       (k.relevance_fit ->> 'chunks')::bigint AS fitted
FROM collections AS k
WHERE k.name = %(name)s;
