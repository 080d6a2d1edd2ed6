-- A row when Cari's BM25 extension is created in this database, whatever the server's files.
SELECT extversion FROM pg_extension WHERE extname = 'cari_bm25';
