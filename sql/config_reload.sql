-- Make the server re-read its configuration files (the embedded server's cari.conf changed).
SELECT pg_reload_conf();
