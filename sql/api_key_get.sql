-- One key by its visible prefix (`cari_3f9a1b2c`).
SELECT id, name, prefix, actions, collections, filter, expires_at, created_at, last_used_at,
       revoked_at
FROM api_keys
WHERE prefix = %(prefix)s;
