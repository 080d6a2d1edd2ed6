-- The given text-search configurations that exist, with their oids (binary COPY sends oids).
SELECT cfgname, oid
FROM pg_ts_config
WHERE cfgname = ANY (%(names)s::text[]) AND pg_ts_config_is_visible(oid);
