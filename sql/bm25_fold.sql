-- Fold the collection's delta into packed blocks (the `cari_bm25` engine only) once it holds at
-- least %(min_postings)s postings (posting rows, and the lexemes of the chunks of the chunk
-- delta) or %(min_dead)s chunks dead in the blocks (every search reads the dead ids): no row
-- below that or without the extension (whose `postings` hold every posting: not counted), else
-- false when another fold or compaction of the collection runs or a writer holds the delta's
-- rows.
SELECT bm25_fold(%(collection_id)s)
WHERE CASE
    WHEN NOT EXISTS (SELECT FROM pg_extension WHERE extname = 'cari_bm25') THEN false
    ELSE (
        SELECT count(*)
        FROM (
            SELECT FROM postings WHERE collection_id = %(collection_id)s LIMIT %(min_postings)s
        ) AS d
    ) + (
        SELECT coalesce(sum(length(ch.tsv)), 0)
        FROM (
            SELECT chunk_id FROM bm25_delta
            WHERE collection_id = %(collection_id)s LIMIT %(min_postings)s
        ) AS d
        JOIN chunks AS ch ON ch.id = d.chunk_id
    ) >= %(min_postings)s
    OR (
        SELECT count(*)
        FROM (
            SELECT FROM bm25_dead WHERE collection_id = %(collection_id)s LIMIT %(min_dead)s
        ) AS d
    ) >= %(min_dead)s
END;
