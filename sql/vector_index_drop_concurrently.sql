-- Drop one width's HNSW index ({index}, an identifier) without queueing every write behind an
-- ACCESS EXCLUSIVE lock: a bulk load into the width's only collection (it inserts far faster
-- without maintaining the graph row by row), or an INVALID index an interrupted concurrent
-- build left. Outside a transaction block, like vector_index_build.
DROP INDEX CONCURRENTLY IF EXISTS {index};
