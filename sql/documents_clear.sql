-- Delete every document of a collection (and their chunks).
DELETE FROM documents WHERE collection_id = %(collection_id)s;
