-- Build one width's HNSW index on one table where it is missing, without blocking writes:
-- CONCURRENTLY takes a SHARE UPDATE EXCLUSIVE lock, which inserts, updates and deletes to every
-- collection pass (a plain CREATE INDEX holds SHARE on the whole table for the build: every
-- write to every collection waits). For a bulk load's rebuild and the start-up repair of an
-- index a killed load left missing. It cannot run in a transaction block: it runs on an
-- autocommit connection whose statement_timeout is 0 and maintenance_work_mem the build's
-- (cari.migrations.MAINTENANCE_OPTIONS). An interrupted build leaves the index INVALID (unused
-- by queries, still updated by writes): vector_index_valid finds it and it is dropped first.
-- Same index as vector_indexes_create: {index}, {table} are identifiers; {indexed}, {ops},
-- {dimension}, {m}, {ef_construction} come from settings, composed with psycopg.sql.
CREATE INDEX CONCURRENTLY IF NOT EXISTS {index} ON {table}
    USING hnsw (({indexed}) {ops}) WITH (m = {m}, ef_construction = {ef_construction})
    WHERE vector_dims(embedding) = {dimension};
