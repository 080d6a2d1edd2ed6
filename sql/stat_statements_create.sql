-- Create pg_stat_statements in this database, for a DBA's `SELECT ... FROM pg_stat_statements`
-- (the embedded server preloads its library: shared_preload_libraries, cari.embedded).
CREATE EXTENSION IF NOT EXISTS pg_stat_statements;
