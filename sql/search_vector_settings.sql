-- A request's own HNSW ef_search, local to the search's transaction (the pool's connections
-- start with CARI_HNSW_EF_SEARCH and iterative scans; see cari.runtime.make_pool).
SELECT set_config('hnsw.ef_search', %(ef_search)s::text, true);
