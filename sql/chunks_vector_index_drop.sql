-- Bulk loads insert far faster without maintaining the HNSW graph row by row; the index is
-- rebuilt once at the end (vector_indexes_create). Searches meanwhile scan exactly.
DROP INDEX IF EXISTS chunks_embedding_idx;
