-- Fold the statistics deltas that writers left into the base tables (a short transaction of
-- its own, after the writes commit). False when another compaction of the collection runs.
SELECT bm25_compact(%(collection_id)s);
