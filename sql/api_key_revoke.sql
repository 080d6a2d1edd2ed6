-- Revoke a key by its prefix; a key revoked already keeps its first revocation time.
UPDATE api_keys SET revoked_at = coalesce(revoked_at, now())
WHERE prefix = %(prefix)s
RETURNING id, name, prefix, actions, collections, filter, expires_at, created_at,
          last_used_at, revoked_at;
