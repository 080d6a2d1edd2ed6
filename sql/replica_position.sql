-- Whether this server is a standby, and how far it has replayed the primary's WAL (a byte
-- position; NULL on a server that is not in recovery).
SELECT pg_is_in_recovery() AS standby, (pg_last_wal_replay_lsn() - '0/0'::pg_lsn)::bigint AS replayed
