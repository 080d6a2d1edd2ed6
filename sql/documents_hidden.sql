-- Which of these ids name a document the {filters} fragment hides from the request (another
-- tenant's): a write through a key with a filter must not replace it. `c` is the alias the
-- fragment names; it starts with AND, so TRUE heads it.
SELECT c.external_id
FROM documents AS c
WHERE c.collection_id = %(collection_id)s AND c.external_id = ANY (%(ids)s::text[])
  AND NOT (TRUE {filters});
