-- Delete one document; its chunks go with it (cascade).
DELETE FROM documents
WHERE collection_id = %(collection_id)s AND external_id = %(external_id)s
RETURNING id;
