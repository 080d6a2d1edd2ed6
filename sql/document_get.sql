-- One document by its external id.
SELECT d.id, d.external_id, d.title, d.source, d.metadata, d.content_hash,
       d.created_at, d.updated_at
FROM documents AS d
WHERE d.collection_id = %(collection_id)s AND d.external_id = %(external_id)s;
