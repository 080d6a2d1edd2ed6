-- Delete a collection; its documents, chunks, catalog items and rates go with it (cascade).
DELETE FROM collections WHERE name = %(name)s RETURNING id;
