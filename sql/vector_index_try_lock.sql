-- For the start-up check: true when one of the HNSW indexes %(indexes)s is missing and no bulk
-- load holds the lock (a bulk load rebuilds its index itself). The lock is held to the end of
-- the transaction, so two start-up checks cannot build an index at once; when nothing is
-- missing no lock is taken.
SELECT EXISTS (SELECT FROM unnest(%(indexes)s::text[]) AS i WHERE to_regclass(i) IS NULL)
       AND pg_try_advisory_xact_lock(417001);
