-- Drop one width's HNSW index ({index}, an identifier): a bulk load inserts far faster without
-- maintaining the graph row by row and rebuilds it once at the end (vector_indexes_create);
-- searches meanwhile scan exactly. A resize drops the indexes of widths no embedder makes.
DROP INDEX IF EXISTS {index};
