-- Collections (all, or the one named) whose relevance fit is due (cari.search.fit.refit_stale):
-- with enough chunks and no fit, a fit for another embedder than the one they name now, or a
-- chunk count grown or shrunk by `factor` since the fit (1 / 0.9: the fit covers at least 90 %
-- of the chunks). Counts come from the BM25 statistics: no scan of chunks.
WITH counts AS (
    SELECT k.name, k.embedder, k.relevance_fit AS fit, coalesce((
               SELECT sum(chunks) FROM bm25_sizes WHERE collection_id = k.id
           ), 0) + coalesce((
               SELECT sum(chunks) FROM bm25_pending_sizes WHERE collection_id = k.id
           ), 0) AS chunks
    FROM collections AS k
    WHERE k.next_embedder IS NULL  -- moving to another embedder: fitted once it has moved
      AND (%(name)s::text IS NULL OR k.name = %(name)s)
)
SELECT name
FROM counts
WHERE chunks >= %(min_chunks)s
  AND (fit IS NULL
       OR (fit ->> 'embedder') IS DISTINCT FROM embedder
       OR chunks >= (fit ->> 'chunks')::numeric * %(factor)s
       OR chunks * %(factor)s <= (fit ->> 'chunks')::numeric)
ORDER BY name;
