-- Build one width's HNSW index on one table where it is missing, in a migration's or a resize's
-- transaction (a bulk load and the start-up repair build concurrently: vector_index_build).
-- Partial and on an expression (cari.vector_space says why): a vector statement uses it when it
-- orders by {indexed} (`embedding::vector(384)`, `cari_halfvec(embedding)::halfvec(3072)`) and
-- filters on `vector_dims(embedding) = {dimension}`.
-- Run inside a transaction: the SET LOCALs lift the statement timeout and give the build memory
-- for this transaction only. {index}, {table} are identifiers; {indexed}, {ops}, {dimension}, {m},
-- {ef_construction}, {memory} come from settings, composed with psycopg.sql.
SET LOCAL statement_timeout = 0;
SET LOCAL maintenance_work_mem = {memory};
CREATE INDEX IF NOT EXISTS {index} ON {table}
    USING hnsw (({indexed}) {ops}) WITH (m = {m}, ef_construction = {ef_construction})
    WHERE vector_dims(embedding) = {dimension};
