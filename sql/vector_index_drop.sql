-- Drop the HNSW index of a width no embedder makes any more ({index}, an identifier), in a
-- resize's transaction (cari.migrations.resize_embeddings).
DROP INDEX IF EXISTS {index};
