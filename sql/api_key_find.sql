-- The key a request presents, by the hash of its secret, if it is usable now: not revoked,
-- not expired. The unique index on secret_hash serves it.
SELECT id, name, prefix, actions, collections, filter, expires_at, created_at, last_used_at,
       revoked_at
FROM api_keys
WHERE secret_hash = %(secret_hash)s
  AND revoked_at IS NULL
  AND (expires_at IS NULL OR expires_at > now());
