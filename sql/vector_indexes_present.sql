-- Cari's HNSW indexes on the embedding columns, whatever their width (vector_indexes_create
-- names them <table>_embedding_<type>_<width>_idx).
SELECT indexname FROM pg_indexes
WHERE schemaname = current_schema()
  AND tablename IN ('chunks', 'catalog_items')
  AND indexname ~ '^(chunks|catalog_items)_embedding_(vector|halfvec)_[0-9]+_idx$';
