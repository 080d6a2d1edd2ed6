-- Content hashes of the given documents that are already stored, to skip unchanged ones.
SELECT external_id, content_hash
FROM documents
WHERE collection_id = %(collection_id)s AND external_id = ANY(%(external_ids)s);
