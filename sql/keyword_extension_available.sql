-- Cari's keyword extension on this server: the version CREATE EXTENSION would install and the
-- one this database has (NULL: not created); no row when the server does not have it.
SELECT default_version, installed_version FROM pg_available_extensions WHERE name = 'cari_bm25';
