-- What a collection's relevance fit covers, for `explain`: the chunk count it was fitted on
-- (NULL: no fit) and the collection's chunk count now, from the BM25 statistics (compacted plus
-- pending), not a count of its rows.
SELECT (k.relevance_fit ->> 'chunks')::bigint AS fitted, coalesce((
           SELECT sum(chunks) FROM bm25_sizes WHERE collection_id = k.id
       ), 0) + coalesce((
           SELECT sum(chunks) FROM bm25_pending_sizes WHERE collection_id = k.id
       ), 0) AS chunks
FROM collections AS k
WHERE k.id = %(collection_id)s;
