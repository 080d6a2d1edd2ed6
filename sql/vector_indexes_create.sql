-- (Re)build the HNSW indexes where they are missing: after a bulk load that deferred them, after
-- resizing the columns, or after a bulk load was killed. Run inside a transaction: the SET LOCALs
-- lift the statement timeout and give the build memory for this transaction only.
-- {m}, {ef_construction}, {memory} come from settings, composed with psycopg.sql.Literal.
SET LOCAL statement_timeout = 0;
SET LOCAL maintenance_work_mem = {memory};
CREATE INDEX IF NOT EXISTS chunks_embedding_idx ON chunks
    USING hnsw (embedding vector_cosine_ops) WITH (m = {m}, ef_construction = {ef_construction});
CREATE INDEX IF NOT EXISTS catalog_items_embedding_idx ON catalog_items
    USING hnsw (embedding vector_cosine_ops) WITH (m = {m}, ef_construction = {ef_construction});
