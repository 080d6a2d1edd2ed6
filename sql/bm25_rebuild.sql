-- Recompute a collection's BM25 postings and statistics from its chunks (new k1, b or title
-- boost; or a repair). Waits for the collection's writers; holds new ones back until commit.
SELECT bm25_rebuild(id) FROM collections WHERE name = %(name)s;
