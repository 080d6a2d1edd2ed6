-- Note that a key was used, unless noted within the last %(every)s: at most one write a key
-- per interval and process, not one per request.
UPDATE api_keys SET last_used_at = now()
WHERE id = %(id)s
  AND (last_used_at IS NULL OR last_used_at < now() - %(every)s::interval);
