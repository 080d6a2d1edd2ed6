-- For the start-up check: false while a bulk load holds the lock (it rebuilds the index itself);
-- held to the end of the transaction, so two start-up checks cannot build the index at once.
SELECT pg_try_advisory_xact_lock(417001);
