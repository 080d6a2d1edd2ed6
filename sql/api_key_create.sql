-- A new key: its row as `api_key_get` reads it. The secret itself is never stored.
INSERT INTO api_keys (name, prefix, secret_hash, actions, collections, filter, expires_at)
VALUES (%(name)s, %(prefix)s, %(secret_hash)s, %(actions)s, %(collections)s, %(filter)s,
        %(expires_at)s)
RETURNING id, name, prefix, actions, collections, filter, expires_at, created_at,
          last_used_at, revoked_at;
