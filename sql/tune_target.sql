-- The collection `cari tune ef-search` measures: its id, its embedder (NULL: the default one)
-- and its own ef_search (NULL: the server's).
SELECT id, embedder, ef_search FROM collections WHERE name = %(name)s;
