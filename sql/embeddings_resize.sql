-- Change the width of every embedding column to a new model's dimension. Old vectors cannot be
-- converted, so they become NULL (the chunks wait for `cari reembed`); the caller then rebuilds
-- the HNSW indexes (vector_indexes_create). {dimension} is an integer from settings, composed
-- with psycopg.sql.Literal.
DROP INDEX IF EXISTS chunks_embedding_idx;
DROP INDEX IF EXISTS catalog_items_embedding_idx;
ALTER TABLE chunks ALTER COLUMN embedding TYPE vector({dimension}) USING NULL;
ALTER TABLE catalog_items ALTER COLUMN embedding TYPE vector({dimension}) USING NULL;
