-- Change the width of every embedding column to a new model's dimension. Old vectors cannot be
-- converted, so they become NULL (the chunks wait for `cari reembed`); the caller then rebuilds
-- the HNSW indexes (vector_indexes_create). {dimension} is an integer from settings, composed
-- with psycopg.sql.Literal. A new type resets the columns' storage to the type's EXTERNAL:
-- MAIN is set again (migration 0006 says why).
DROP INDEX IF EXISTS chunks_embedding_idx;
DROP INDEX IF EXISTS catalog_items_embedding_idx;
ALTER TABLE chunks ALTER COLUMN embedding TYPE vector({dimension}) USING NULL,
    ALTER COLUMN embedding SET STORAGE MAIN;
ALTER TABLE catalog_items ALTER COLUMN embedding TYPE vector({dimension}) USING NULL,
    ALTER COLUMN embedding SET STORAGE MAIN;
