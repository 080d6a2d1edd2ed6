-- Drop one width's HNSW index ({index}, an identifier) in a transaction: a resize drops the
-- indexes of widths no embedder makes (cari.migrations.resize_embeddings), benchmarks time loads
-- without one. A bulk load drops concurrently (vector_index_drop_concurrently).
DROP INDEX IF EXISTS {index};
