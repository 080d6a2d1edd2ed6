-- Before bm25_unfold.sql: writers that append to the chunk delta (bm25_index) or mark chunks
-- dead (bm25_unindex) wait until the extension is dropped and then, seeing it gone in the
-- snapshot of the statement that appends, write posting rows instead.
LOCK TABLE bm25_delta, bm25_dead IN SHARE ROW EXCLUSIVE MODE;
