-- One document by its external id, if the {filters} fragment lets the request see it (a key's
-- tenant filter, cari.search.filters; `c` is the alias it names).
SELECT c.id, c.external_id, c.title, c.source, c.metadata, c.content_hash,
       c.created_at, c.updated_at
FROM documents AS c
WHERE c.collection_id = %(collection_id)s AND c.external_id = %(external_id)s
  {filters};
