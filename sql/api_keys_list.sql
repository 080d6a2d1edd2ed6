-- Every key, oldest first, revoked ones included (they say when they were revoked).
SELECT id, name, prefix, actions, collections, filter, expires_at, created_at, last_used_at,
       revoked_at
FROM api_keys
ORDER BY id;
