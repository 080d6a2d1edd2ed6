-- Whether the index %(index)s is usable: no row when it is missing, false when a concurrent
-- build of it was interrupted (INVALID: queries ignore it, writes still maintain it).
SELECT i.indisvalid FROM pg_index AS i WHERE i.indexrelid = to_regclass(%(index)s);
