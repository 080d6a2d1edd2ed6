-- Delete one document, if the {filters} fragment lets the request see it (a key's tenant
-- filter, cari.search.filters; `c` is the alias it names); its chunks go with it (cascade).
DELETE FROM documents AS c
WHERE c.collection_id = %(collection_id)s AND c.external_id = %(external_id)s
  {filters}
RETURNING c.id;
