-- Delete every catalog item of a collection.
DELETE FROM catalog_items WHERE collection_id = %(collection_id)s;
