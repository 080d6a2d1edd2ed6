-- A page of a collection's documents in id order, after the cursor (the last id of the page
-- before, or NULL), of one source if given. Keyset paging on UNIQUE (collection_id,
-- external_id): each page costs the same however deep. `c` is the alias the metadata
-- {filters} fragment of cari.search.filters names (parameterized).
SELECT c.external_id AS id, c.title, c.source, c.metadata, c.content_hash,
       (SELECT count(*) FROM chunks AS ch WHERE ch.document_id = c.id) AS chunks,
       c.created_at, c.updated_at
FROM documents AS c
WHERE c.collection_id = %(collection_id)s
  AND (%(after)s::text IS NULL OR c.external_id > %(after)s::text)
  AND (%(source)s::text IS NULL OR c.source = %(source)s::text)
  {filters}
ORDER BY c.external_id
LIMIT %(limit)s;
