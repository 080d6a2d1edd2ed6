-- Which keyword engine serves this database: the version of Cari's extension when it is created
-- here and the server has its files at that version (the control file found, its library beside
-- it), from 1.1 on (1.0 cannot read the chunk delta: Cari updates it when the server has 1.1);
-- no row: the SQL statement (search_keyword.sql) serves.
SELECT e.extversion
FROM pg_extension AS e
JOIN pg_available_extensions AS a ON a.name = e.extname AND a.default_version = e.extversion
WHERE e.extname = 'cari_bm25' AND e.extversion <> '1.0';
