-- A row when the database has Cari's BM25 extension, which then serves keyword search.
SELECT extversion FROM pg_extension WHERE extname = 'cari_bm25';
