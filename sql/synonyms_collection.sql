-- A collection's id and language, for its synonym rules; locked while they are replaced, so
-- two replacements do not interleave.
SELECT id, language::text FROM collections WHERE name = %(name)s
FOR UPDATE;
