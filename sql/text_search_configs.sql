-- The text-search configurations this server knows, for error messages and docs.
SELECT cfgname FROM pg_ts_config ORDER BY cfgname;
