-- The primary's WAL flushed to disk, as a byte position: a transaction committed before this
-- runs ends at or before it, so a replica that has replayed this far holds that transaction.
SELECT (pg_current_wal_flush_lsn() - '0/0'::pg_lsn)::bigint AS flushed
